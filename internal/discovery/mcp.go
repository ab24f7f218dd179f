package discovery

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MCP describes the MCP endpoint for the documents that advertise it.
type MCP struct {
	// Versions are the protocol revisions served, newest first.
	Versions []string
	Tools    []MCPTool
}

// MCPTool is one MCP tool as the documents list it.
type MCPTool struct {
	Name, Description string
	// NeedsKey is false for the tools that answer without a key.
	NeedsKey bool
}

const keyPlaceholder = "tsk_<id>_<secret>"

// mcpClientConfig is the block MCP clients (Claude, Cursor, VS Code and
// others) take in their configuration files, ready to paste.
func mcpClientConfig(cfg Config) map[string]any {
	return map[string]any{"mcpServers": map[string]any{"tessera": map[string]any{
		"type":    "http",
		"url":     cfg.PublicURL + "/mcp",
		"headers": map[string]string{"Authorization": "Bearer " + keyPlaceholder},
	}}}
}

func mcpClientConfigText(cfg Config) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the text is pasted, so <id> stays <id>
	enc.SetIndent("", "  ")
	if err := enc.Encode(mcpClientConfig(cfg)); err != nil {
		panic(err) // a static map
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func mcpSummary(cfg Config) map[string]any {
	var names, keyless []string
	for _, t := range cfg.MCP.Tools {
		names = append(names, t.Name)
		if !t.NeedsKey {
			keyless = append(keyless, t.Name)
		}
	}
	return map[string]any{
		"url":               cfg.PublicURL + "/mcp",
		"transport":         "streamable-http",
		"protocol_versions": cfg.MCP.Versions,
		"stateless":         true,
		"session_id":        false,
		"batches":           true,
		"auth":              "Authorization: Bearer " + keyPlaceholder + ", needed by every tool except " + strings.Join(keyless, ", "),
		"tools":             names,
		"client_config":     mcpClientConfig(cfg),
	}
}

// mcpText is the MCP paragraph of llms.txt, before its link sections.
func mcpText(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tessera is an MCP tool server at %s/mcp (Streamable HTTP, JSON answers, stateless: no session id).\n", cfg.PublicURL)
	fmt.Fprintf(&b, "Revisions: %s (2026-07-28 without a handshake; the others after initialize). JSON-RPC batches are accepted on every revision.\n", strings.Join(cfg.MCP.Versions, ", "))
	b.WriteString("Tools take the HTTP API's field names (a task is task_id) and an optional namespace. A handled error is a result with isError: true and\n")
	b.WriteString("structuredContent {status, code, message, field?, retry_after?, reset_at?}: the HTTP status and error code. Client configuration:\n\n")
	b.WriteString(mcpClientConfigText(cfg))
	b.WriteString("\n\n")
	return b.String()
}

// mcpToolReference lists every MCP tool, for llms-full.txt.
func mcpToolReference(cfg Config) string {
	var b strings.Builder
	for _, t := range cfg.MCP.Tools {
		key := "key"
		if !t.NeedsKey {
			key = "no key"
		}
		fmt.Fprintf(&b, "- `%s` (%s) — %s\n", t.Name, key, t.Description)
	}
	return b.String()
}
