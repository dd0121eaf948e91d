"""odradek controller: the Raft metadata quorum and cluster control."""
