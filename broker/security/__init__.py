"""Authentication and authorization: principals, SCRAM credentials, ACLs."""
