package client_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The client's types are written by hand beside the server's; a field
// renamed, retyped or made optional on one side and not the other would
// drift silently, since the route tests check routes, not fields. Each
// pair here is compared as JSON sees it, field by field and all the way
// down: the name, whether it is omitted when empty, and the shape of its
// value. Where the client means to differ, the difference is listed with
// its reason.
func TestClientTypesMatchTheServers(t *testing.T) {
	pairs := []struct {
		client, server any
		// differs are the intended differences, by path, with why.
		differs map[string]string
	}{
		{client.Task{}, tessera.Task{}, nil},
		{client.EnqueueRequest{}, core.EnqueueParams{}, nil},
		{client.EnqueueBatchRequest{}, core.EnqueueBatchParams{}, nil},
		{client.Claim{}, core.Claimed{}, map[string]string{
			// Over HTTP an empty claim is 204 with these as headers,
			// which Claim reads into an Empty; a granted claim has none.
			".task":               "always in a granted claim, the only answer Claim decodes",
			".retry_after":        "an empty claim's Retry-After header (Empty.RetryAfter)",
			".queue_known":        "an empty claim's header (Empty.QueueUnknown)",
			".queue_paused":       "an empty claim's: a paused queue is an empty queue to a worker",
			".uncovered_requires": "an empty claim's header (Empty.UncoveredRequires)",
		}},
		{client.ParentResult{}, core.ParentResult{}, nil},
		{client.Debounce{}, core.Debounce{}, nil},
		{client.ClaimRequest{}, core.ClaimParams{}, nil},
		{client.HeartbeatRequest{}, core.HeartbeatParams{}, nil},
		{client.Heartbeat{}, core.Heartbeat{}, nil},
		{client.SubmitRequest{}, core.SubmitParams{}, nil},
		{client.SubmitItem{}, core.SubmitItem{}, nil},
		{client.SubmitResult{}, core.SubmitResult{}, nil},
		{client.ClaimEvents{}, core.ClaimEvents{}, nil},
		{client.GateRequest{}, core.GateParams{}, map[string]string{
			// The server takes one gate's fields inline or a list; the
			// client always sends the list, which holds one as well.
			".gates":           "always sent: the list form",
			".key":             "the inline form, which the client does not use",
			".kind":            "the inline form",
			".message":         "the inline form",
			".on_timeout":      "the inline form",
			".schema":          "the inline form",
			".timeout_seconds": "the inline form",
			".url":             "the inline form",
		}},
		{client.GateAnswerRequest{}, core.GateAnswerParams{}, nil},
		{client.Record{}, tessera.Record{}, nil},
		{client.PutRecordRequest{}, core.PutRecordParams{}, nil},
		{client.Principal{}, tessera.Principal{}, nil},
		{client.Key{}, tessera.Key{}, nil},
		{client.AuditEvent{}, tessera.AuditEvent{}, nil},
		{client.AuditCounter{}, tessera.AuditCounter{}, nil},
		{client.TaskPage{}, core.TaskPage{}, nil},
		{client.RecordPage{}, core.RecordPage{}, nil},
		{client.VersionPage{}, core.VersionPage{}, nil},
		{client.BucketPage{}, core.BucketPage{}, nil},
		{client.AuditPage{}, core.AuditPage{}, nil},
		{client.KeyPage{}, core.KeyPage{}, nil},
		{client.PrincipalPage{}, core.PrincipalPage{}, nil},
		{client.NamespacePage{}, core.NamespacePage{}, nil},
		{client.NewKey{}, core.NewKey{}, nil},
		{client.Me{}, core.Me{}, nil},
		{client.BlobDeclared{}, core.BlobDeclared{}, nil},
		{client.UploadReceived{}, core.UploadReceived{}, nil},
		{client.Purged{}, core.Purged{}, nil},
		{client.Health{}, core.Health{}, nil},
		{client.Board{}, core.Board{}, nil},
		{client.ActivityPage{}, core.ActivityPage{}, nil},
	}
	for _, p := range pairs {
		c, s := jsonShape(reflect.TypeOf(p.client), ""), jsonShape(reflect.TypeOf(p.server), "")
		name := fmt.Sprintf("%T ~ %T", p.client, p.server)
		for _, path := range union(c, s) {
			if c[path] == s[path] {
				continue
			}
			if why, ok := p.differs[path]; ok && why != "" {
				continue
			}
			t.Errorf("%s: %s is %s in the client, %s on the server", name, path, orNone(c[path]), orNone(s[path]))
		}
		for path := range p.differs {
			if c[path] == s[path] {
				t.Errorf("%s: %s is listed as differing, and no longer does", name, path)
			}
		}
	}
}

// jsonShape lists what JSON sees of t: each field's path, with whether it
// is omitted when empty and its value's shape.
func jsonShape(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonShape(f.Type, prefix) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + "." + name
		omit := ""
		if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			omit = "omitempty "
		}
		shape, inner := valueShape(f.Type)
		out[path] = omit + shape
		if inner != nil {
			for k, v := range jsonShape(inner, path+strings.Repeat("[]", strings.Count(shape, "[]"))) {
				out[k] = v
			}
		}
	}
	return out
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// valueShape is how JSON writes a value of t, and the struct inside it
// whose fields are compared in turn.
func valueShape(t reflect.Type) (string, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "time", nil
	case t == rawType, t.Kind() == reflect.Interface:
		return "json", nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "number", nil
	case reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes", nil
		}
		s, inner := valueShape(t.Elem())
		return "[]" + s, inner
	case reflect.Map:
		s, inner := valueShape(t.Elem())
		return "map of " + s, inner
	case reflect.Struct:
		return "object", t
	}
	return t.Kind().String(), nil
}

func union(a, b map[string]string) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}
