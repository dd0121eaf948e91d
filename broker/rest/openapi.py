"""The HTTP API's OpenAPI 3 document (``GET /openapi.json``), made from the route table the router uses
(routes.py), so every route served is described and nothing else is. Request bodies are described field by field;
answers by their common shape (Confluent's ``kind``, ``metadata`` and ``data``), the error by Confluent's."""

from __future__ import annotations

from typing import Any

from odradek.broker.rest.routes import PATH_PARAMETERS, ROUTES, Route

TITLE = "odradek HTTP API"
VERSION = "3.0.0"

_STRING: dict[str, Any] = {"type": "string"}
_NULLABLE_STRING: dict[str, Any] = {"type": "string", "nullable": True}
_INTEGER: dict[str, Any] = {"type": "integer"}
_DATA = {
    "type": "object",
    "nullable": True,
    "properties": {"type": {"type": "string", "enum": ["BINARY", "JSON", "STRING"]}, "data": {"nullable": True}},
}
_CONFIG_ENTRIES = {
    "type": "array",
    "items": {"type": "object", "required": ["name"], "properties": {"name": _STRING, "value": _NULLABLE_STRING}},
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error_code", "message"],
        "properties": {"error_code": {"type": "integer", "format": "int32"}, "message": _NULLABLE_STRING},
    },
    "Resource": {
        "type": "object",
        "description": "A resource (`kind`, `metadata.self`, its fields and `related` links) or a collection of "
        "them (`data`), in Confluent REST Proxy v3's shapes.",
        "required": ["kind", "metadata"],
        "properties": {"kind": _STRING, "metadata": {"type": "object"}, "data": {"type": "array"}},
    },
    "CreateTopicRequest": {
        "type": "object",
        "required": ["topic_name"],
        "properties": {
            "topic_name": _STRING,
            "partitions_count": _INTEGER,
            "replication_factor": _INTEGER,
            "replicas_assignments": {"type": "object", "additionalProperties": {"type": "array", "items": _INTEGER}},
            "configs": _CONFIG_ENTRIES,
            "validate_only": {"type": "boolean"},
        },
    },
    "UpdateConfigRequest": {"type": "object", "required": ["value"], "properties": {"value": _STRING}},
    "AlterConfigBatchRequest": {
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": _STRING,
                        "value": _NULLABLE_STRING,
                        "operation": {"type": "string", "enum": ["SET", "DELETE", "APPEND", "SUBTRACT"]},
                    },
                },
            },
            "validate_only": {"type": "boolean"},
        },
    },
    "ProduceRequest": {
        "type": "object",
        "properties": {
            "partition_id": {"type": "integer", "nullable": True},
            "key": _DATA,
            "value": _DATA,
            "headers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": _STRING, "value": {"type": "string", "format": "byte", "nullable": True}},
                },
            },
            "timestamp": {"type": "string", "format": "date-time", "nullable": True},
        },
    },
    "ProduceResponse": {
        "type": "object",
        "required": ["error_code"],
        "properties": {
            "error_code": _INTEGER,
            "cluster_id": _STRING,
            "topic_name": _STRING,
            "partition_id": _INTEGER,
            "offset": {"type": "integer", "format": "int64"},
            "timestamp": {"type": "string", "format": "date-time"},
            "key": {"type": "object", "nullable": True},
            "value": {"type": "object", "nullable": True},
        },
    },
    "RecordList": {
        "type": "object",
        "description": "odradek's own: the records read, and where the next read starts (`next_offset`).",
        "required": ["kind", "metadata", "data", "next_offset"],
        "properties": {
            "kind": _STRING,
            "metadata": {"type": "object"},
            "next_offset": {"type": "integer", "format": "int64"},
            "high_watermark": {"type": "integer", "format": "int64"},
            "log_start_offset": {"type": "integer", "format": "int64"},
            "data": {"type": "array", "items": {"type": "object"}},
        },
    },
    "CreateAclRequest": {
        "type": "object",
        "required": ["resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"],
        "properties": {
            name: _STRING
            for name in ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation")
        }
        | {"permission": _STRING},
    },
}

_POSITIONS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["partition_id", "offset"],
        "properties": {"partition_id": _INTEGER, "offset": {"type": "integer", "format": "int64"}},
    },
}

# The web console's request bodies (docs/console.md).
SCHEMAS.update(
    {
        "UpdatePartitionCountRequest": {
            "type": "object",
            "required": ["partitions_count"],
            "properties": {"partitions_count": _INTEGER},
        },
        "SearchRequest": {
            "type": "object",
            "properties": {
                "partitions": {"type": "array", "items": _INTEGER, "nullable": True},
                "start": {"type": "string", "enum": ["earliest", "end", "offset", "timestamp"]},
                "offset": {"type": "integer", "format": "int64"},
                "timestamp": {"type": "string", "format": "date-time"},
                "tail": _INTEGER,
                "cursor": _POSITIONS,
                "filter": {
                    "type": "object",
                    "properties": {
                        "key": _STRING,
                        "value_contains": _STRING,
                        "json_path": _STRING,
                        "json_value": {"nullable": True},
                        "header": _STRING,
                        "header_value": _STRING,
                    },
                },
                "max_matches": _INTEGER,
                "max_scanned": {"type": "integer", "format": "int64"},
                "timeout_ms": _INTEGER,
                "decode": {"type": "boolean"},
            },
        },
        "RecordSearch": {
            "type": "object",
            "description": "odradek's own: one page of matches (key, value and header values in base64) and the "
            "cursor the next page continues from (null: every partition reached its end).",
            "required": ["kind", "stopped", "scanned", "partitions", "data"],
            "properties": {
                "kind": _STRING,
                "stopped": {"type": "string", "enum": ["end", "max_matches", "max_scanned", "timeout"]},
                "scanned": {"type": "integer", "format": "int64"},
                "elapsed_ms": _INTEGER,
                "partitions": {"type": "array", "items": {"type": "object"}},
                "cursor": {**_POSITIONS, "nullable": True},
                "data": {"type": "array", "items": {"type": "object"}},
            },
        },
        "RepublishRequest": {
            "type": "object",
            "required": ["destination"],
            "properties": {
                "destination": _STRING,
                "records": _POSITIONS,
                "partition_id": _INTEGER,
                "start_offset": {"type": "integer", "format": "int64"},
                "end_offset": {"type": "integer", "format": "int64"},
                "same_partition": {"type": "boolean"},
                "keep_timestamps": {"type": "boolean"},
            },
        },
        "ResetOffsetsRequest": {
            "type": "object",
            "required": ["to"],
            "properties": {
                "to": {"type": "string", "enum": ["earliest", "latest", "offset", "timestamp"]},
                "offset": {"type": "integer", "format": "int64"},
                "timestamp": {"type": "string", "format": "date-time"},
                "topics": {"type": "array", "items": _STRING},
                "partitions": {"type": "array", "items": _INTEGER},
                "dry_run": {"type": "boolean"},
            },
        },
        "ScramCredentialRequest": {
            "type": "object",
            "required": ["user", "password"],
            "properties": {
                "user": _STRING,
                "password": {"type": "string", "format": "password"},
                "mechanism": {"type": "string", "enum": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
                "iterations": _INTEGER,
            },
        },
        "AlterClientQuotaRequest": {
            "type": "object",
            "required": ["entity"],
            "properties": {
                "entity": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["entity_type"],
                        "properties": {
                            "entity_type": {"type": "string", "enum": ["user", "client-id"]},
                            "name": _NULLABLE_STRING,
                        },
                    },
                },
                "set": {"type": "object", "additionalProperties": {"type": "number"}},
                "remove": {"type": "array", "items": _STRING},
            },
        },
    }
)

_ANSWERS = {
    "produceRecord": "ProduceResponse",
    "readOdradekRecords": "RecordList",
    "searchOdradekRecords": "RecordSearch",
    "getOpenApi": None,
}


def _operation(r: Route) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": PATH_PARAMETERS[name][1],
            "schema": {"type": PATH_PARAMETERS[name][0]},
        }
        for name in r.params()
    ]
    parameters += [
        {
            "name": p.name,
            "in": "query",
            "required": p.required,
            "description": p.description,
            "schema": {"type": p.type},
        }
        for p in r.query
    ]
    if r.status == 204:
        success: dict[str, Any] = {"description": "Done."}
    else:
        schema = _ANSWERS.get(r.operation, "Resource")
        answer = {"$ref": f"#/components/schemas/{schema}"} if schema else {"type": "object"}
        success = {"description": "OK.", "content": {"application/json": {"schema": answer}}}
    error = {
        "description": "Refused.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    out: dict[str, Any] = {
        "operationId": r.operation,
        "summary": r.summary,
        "tags": [r.tag],
        "parameters": parameters,
        "responses": {str(r.status): success, "default": error},
    }
    if r.body is not None:
        out["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{r.body}"}}},
        }
    if r.own:
        out["x-odradek-own"] = True
    return out


def document(routes: tuple[Route, ...] = ROUTES, basic_auth: bool = False) -> dict[str, Any]:
    """The document for ``routes``; ``basic_auth``: every operation needs HTTP Basic credentials."""
    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        paths.setdefault(r.template, {})[r.method.lower()] = _operation(r)
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": TITLE,
            "version": VERSION,
            "description": "Confluent REST Proxy v3's resources on odradek's brokers, and odradek's own bounded "
            "read of a partition's records (operations marked x-odradek-own). docs/http-api.md.",
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS, "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}}},
    }
    if basic_auth:
        doc["security"] = [{"basic": []}]
    return doc
