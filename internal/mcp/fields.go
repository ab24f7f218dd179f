package mcp

// fieldDocs describes the tools' arguments by their names, which are the
// HTTP API's field names: one glossary, so an argument means the same in
// every tool that takes it.
var fieldDocs = map[string]string{
	"namespace":       `the namespace to act in (default "main"); your key needs a grant for it`,
	"idempotency_key": "any string of up to 128 printable ASCII characters; a retry with the same key and arguments returns the first answer instead of acting again (24 h)",
	"task_id":         "the task's id",
	"queue":           `the queue name (default "default")`,
	"title":           "a short title for the task",
	"brief":           "instructions for whoever works the task (text, at most 64 KiB)",
	"payload":         "the task's input: any JSON value, at most 256 KiB",
	"labels":          "up to 16 labels to filter by",
	"priority":        "higher priority tasks are claimed first (default 0)",
	"public":          "show the task on the public board",
	"max_attempts":    "how many claims the task may use before it is dead (default 3)",
	"run_at":          "RFC 3339 time before which the task is not claimed",
	"state":           "only tasks in this state: scheduled, ready, leased, paused, succeeded, dead or canceled",
	"label":           "only tasks with this label",
	"cursor":          "next_cursor of the previous page",
	"limit":           "page size, 1–200 (default 50)",
	"lease_seconds":   "the lease's length in seconds, 10–3600 (default 300)",
	"wait_seconds":    "wait up to this many seconds (0–20) for a task when none is ready",
	"lease_token":     "the token of your lease (lease.token from claim_task)",
	"progress":        "any JSON progress report, at most 4 KiB",
	"outcome":         `submit_task: "succeeded" or "failed"; my_audit: only counters with this outcome, e.g. forbidden or empty`,
	"result":          "the run's result: any JSON value, at most 256 KiB",
	"error":           "what went wrong, for a failed outcome",
	"since":           "only what came after this (a sequence number for claim_events, an RFC 3339 time within 24 h for my_audit)",
	"wait":            "wait up to this many seconds (0–30) for something to arrive",
	"bucket":          "the bucket: ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$",
	"key":             "the record key within the bucket: ^[A-Za-z0-9_][A-Za-z0-9_.:=@-]{0,255}$",
	"value":           "the record's value: any JSON value, at most 256 KiB",
	"if_version":      "write only if the current version is this (0: only if the record does not exist)",
	"version":         "a version number (default: the newest)",
	"prefix":          "only keys starting with this",
	"data":            "the bytes, standard base64, at most 512 KiB decoded",
	"content_type":    "the bytes' media type (default application/octet-stream)",
	"raw_policy":      "who may read raw bytes of the namespace, set by its first upload: private (the uploader) or namespace (any key with read)",
	"sha256":          "the blob's SHA-256 as 64 hex digits, or its ref sha256:<hex>",
	"action":          "only this action, e.g. claim.grant or record.write",
}

func fieldDoc(name string) string { return fieldDocs[name] }
