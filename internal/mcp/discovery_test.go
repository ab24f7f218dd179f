package mcp_test

import (
	"encoding/json"
	"github.com/tessera-dev/tessera/internal/ops"
	"strings"
	"testing"
)

// The discovery documents advertise the MCP endpoint, its revisions and
// every tool, with a client configuration that can be pasted as it is.
func TestDiscoveryAdvertisesMCP(t *testing.T) {
	s := start(t)
	get := func(path string) []byte {
		r := s.send("GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("GET %s: %d", path, r.Status)
		}
		return r.Body
	}
	var connect struct {
		MCPURL string `json:"mcp_url"`
		MCP    struct {
			URL              string   `json:"url"`
			ProtocolVersions []string `json:"protocol_versions"`
			Batches          bool     `json:"batches"`
			Tools            []string `json:"tools"`
			ClientConfig     struct {
				MCPServers map[string]struct {
					Type    string            `json:"type"`
					URL     string            `json:"url"`
					Headers map[string]string `json:"headers"`
				} `json:"mcpServers"`
			} `json:"client_config"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(get("/connect.json"), &connect); err != nil {
		t.Fatal(err)
	}
	const url = "http://127.0.0.1:8787/mcp"
	srv := connect.MCP.ClientConfig.MCPServers["tessera"]
	if connect.MCPURL != url || connect.MCP.URL != url || len(connect.MCP.ProtocolVersions) != 4 || !connect.MCP.Batches ||
		len(connect.MCP.Tools) != len(ops.Tools()) || srv.URL != url || srv.Type != "http" || srv.Headers["Authorization"] != "Bearer tsk_<id>_<secret>" {
		t.Fatalf("connect.json: %+v", connect)
	}
	config := `"mcpServers": {`
	for _, path := range []string{"/llms.txt", "/llms-full.txt", "/connect"} {
		body := string(get(path))
		if !strings.Contains(body, url) || !strings.Contains(body, "2026-07-28") {
			t.Errorf("%s does not advertise %s on 2026-07-28", path, url)
		}
		if path != "/connect" && !strings.Contains(body, config) || path == "/connect" && !strings.Contains(body, "&#34;mcpServers&#34;: {") {
			t.Errorf("%s has no client configuration", path)
		}
	}
	full := string(get("/llms-full.txt"))
	for _, tool := range connect.MCP.Tools {
		if !strings.Contains(full, "- `"+tool+"`") {
			t.Errorf("llms-full.txt does not describe %s", tool)
		}
	}
	var card struct {
		Capabilities struct {
			Extensions []struct {
				URI    string         `json:"uri"`
				Params map[string]any `json:"params"`
			} `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(get("/.well-known/agent-card.json"), &card); err != nil || len(card.Capabilities.Extensions) != 1 ||
		card.Capabilities.Extensions[0].Params["url"] != url {
		t.Fatalf("agent card: %+v %v", card, err)
	}
}
