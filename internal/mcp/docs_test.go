package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tessera-dev/tessera/internal/ops"
)

// guidePath is the MCP guide the tests below hold to the server.
const guidePath = "../../docs/mcp.md"

func readGuide(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of doc between <!-- name --> and <!-- /name -->.
func section(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- "+name+" -->")
	inside, _, closed := strings.Cut(rest, "<!-- /"+name+" -->")
	if !ok || !closed {
		t.Fatalf("%s has no <!-- %s --> … <!-- /%s --> section", guidePath, name, name)
	}
	return inside
}

// serverEntry is one server of an mcpServers configuration: the fields a
// Streamable HTTP client reads.
type serverEntry struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// guideConfig reads the guide's configuration block: its JSON, and its one
// server, "tessera", which holds nothing beyond type, url and headers.
func guideConfig(t *testing.T, doc string) (json.RawMessage, serverEntry) {
	t.Helper()
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(section(t, doc, "mcp-config"))
	if m == nil {
		t.Fatal("the mcp-config section holds no json block")
	}
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(m[1]), &cfg); err != nil || len(cfg.MCPServers) != 1 || cfg.MCPServers["tessera"] == nil {
		t.Fatalf("the configuration block is not one mcpServers entry named tessera (%v):\n%s", err, m[1])
	}
	dec := json.NewDecoder(bytes.NewReader(cfg.MCPServers["tessera"]))
	dec.DisallowUnknownFields()
	var e serverEntry
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("the tessera entry: %v", err)
	}
	return json.RawMessage(m[1]), e
}

// placeholderKey is how the guide writes a key.
const placeholderKey = "tsk_<id>_<secret>"

// forServer is the entry as a user fills it in for the server at base
// with key: the URL's scheme and host the server's, its path as written;
// the key in place of the placeholder. Nothing else changes.
func (e serverEntry) forServer(t *testing.T, base, key string) serverEntry {
	t.Helper()
	u, err := url.Parse(e.URL)
	b, err2 := url.Parse(base)
	if err != nil || err2 != nil || u.Path != "/mcp" || u.RawQuery != "" {
		t.Fatalf("the guide's url %q is not a server's /mcp", e.URL)
	}
	u.Scheme, u.Host = b.Scheme, b.Host
	out := serverEntry{Type: e.Type, URL: u.String(), Headers: map[string]string{}}
	for k, v := range e.Headers {
		out.Headers[k] = strings.ReplaceAll(v, placeholderKey, key)
	}
	if e.Type != "http" || len(e.Headers) != 1 || e.Headers["Authorization"] != "Bearer "+placeholderKey {
		t.Fatalf("the guide's entry is not type http with the one header Authorization: Bearer %s: %+v", placeholderKey, e)
	}
	return out
}

// headers is an HTTP client's transport that sends the configured headers
// with every request, as an MCP client does with an entry's headers.
type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The guide's configuration block is what the server's own /connect.json
// advertises, and the official clients connect with exactly that URL and
// header — the test server's address and a real key put in, no option
// beside them — list every tool and call one that needs the key.
func TestMCPGuideConfigConnects(t *testing.T) {
	doc := readGuide(t)
	raw, entry := guideConfig(t, doc)
	s := start(t) // its public URL is http://127.0.0.1:8787, as the guide writes
	connect := s.send("GET", "/connect.json", nil)
	var advertised struct {
		MCP struct {
			ClientConfig json.RawMessage `json:"client_config"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(connect.Body, &advertised); err != nil || !jsonEqual(string(raw), string(advertised.MCP.ClientConfig)) {
		t.Fatalf("the guide's configuration block differs from /connect.json's client_config:\nguide: %s\nserver: %s", raw, advertised.MCP.ClientConfig)
	}
	key := s.newKey("namespace:main", "read")
	filled := entry.forServer(t, s.URL, key)
	var tools []string
	for _, o := range ops.Tools() {
		tools = append(tools, o.Tool.Name)
	}
	slices.Sort(tools)

	t.Run("go-sdk", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		client := sdk.NewClient(&sdk.Implementation{Name: "tessera-docs-config", Version: "1.0.0"}, nil)
		cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: filled.URL,
			HTTPClient: &http.Client{Transport: headers(filled.Headers)}}, nil)
		if err != nil {
			t.Fatalf("connect with the guide's entry: %v", err)
		}
		defer cs.Close()
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		var got []string
		for _, tool := range list.Tools {
			got = append(got, tool.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tools) {
			t.Fatalf("listed %v, want %v", got, tools)
		}
		who, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil || who.IsError {
			t.Fatalf("whoami with the guide's header: %v %+v", err, who)
		}
		t.Logf("go sdk on %s: %d tools", cs.InitializeResult().ProtocolVersion, len(got))
	})

	node := requireNode(t)
	entryJSON, _ := json.Marshal(filled)
	for _, v := range []string{"v1", "v2"} {
		t.Run("ts-sdk-"+v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "config.mjs", v)
			cmd.Dir = nodeDir
			cmd.Env = append(os.Environ(), "TESSERA_MCP_SERVER="+string(entryJSON))
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("config.mjs %s: %v\nstdout: %s\nstderr: %s", v, err, out, stderr)
			}
			var r struct {
				Client          string   `json:"client"`
				ProtocolVersion string   `json:"protocolVersion"`
				Tools           []string `json:"tools"`
				Key             string   `json:"key"`
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("config.mjs %s printed no report: %s", v, out)
			}
			slices.Sort(r.Tools)
			if !slices.Equal(r.Tools, tools) || !strings.HasPrefix(key, "tsk_"+r.Key+"_") || r.Key == "" {
				t.Fatalf("config.mjs %s: %+v", v, r)
			}
			t.Logf("%s on %s: %d tools", r.Client, r.ProtocolVersion, len(r.Tools))
		})
	}
}

// The guide's other ways to connect name the same server: Claude Code's
// command the same name, URL and header as the configuration block, and
// Claude Desktop's bridge the same URL.
func TestMCPGuideSnippetsAgree(t *testing.T) {
	doc := readGuide(t)
	_, entry := guideConfig(t, doc)
	m := regexp.MustCompile(`(?m)^claude mcp add --transport http (\S+) (\S+) --header "([^"]+)"$`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("the guide has no `claude mcp add --transport http NAME URL --header \"…\"` line")
	}
	name, u, header := m[1], m[2], m[3]
	hname, hvalue, _ := strings.Cut(header, ": ")
	if name != "tessera" || u != entry.URL || entry.Headers[hname] != hvalue {
		t.Errorf("claude mcp add names %s at %s with %q; the configuration block tessera at %s with %v", name, u, header, entry.URL, entry.Headers)
	}
	if !strings.Contains(doc, `"mcp-remote", "`+entry.URL+`"`) {
		t.Errorf("the Claude Desktop block does not bridge to %s", entry.URL)
	}
}

// The guide's tool table has a row for every tool tools/list answers, and
// no other, and each row names every argument of the tool's input schema
// (namespace, which most take, is said once above the table).
func TestMCPGuideListsEveryTool(t *testing.T) {
	table := section(t, readGuide(t), "tools")
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	s := start(t)
	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]any `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.post(rpc(1, "tools/list", nil)).one(t).Result, &list); err != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	listed := map[string]bool{}
	for _, tool := range list.Tools {
		listed[tool.Name] = true
		row, ok := rows[tool.Name]
		if !ok {
			t.Errorf("%s has no row in %s's tool table", tool.Name, guidePath)
			continue
		}
		for arg := range tool.InputSchema.Properties {
			if arg == "namespace" && tool.Name != "explain_access_modes" {
				continue
			}
			if !strings.Contains(row, "`"+arg+"`") {
				t.Errorf("%s's row does not name its argument %s: %s", tool.Name, arg, row)
			}
		}
	}
	for name := range rows {
		if !listed[name] {
			t.Errorf("%s's tool table has a row for %s, which tools/list does not list", guidePath, name)
		}
	}
}
