package httpapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// A person answers a task's form gate in the console: the queue shows
// the task gated, its page renders the form from the gate's schema, an
// answer the schema refuses comes back with the server's words by the
// form, and the accepted answer is what the API then holds, the task
// ready for its worker.
func TestConsoleAnswersAFormGate(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"title": "deploy", "queue": "deploy", "gates": []map[string]any{{
		"key": "where", "message": "Deploy where?", "timeout_seconds": 3600,
		// Raw, to keep the fields in the producer's order, which the form
		// follows.
		"schema": json.RawMessage(`{"type": "object", "required": ["region"], "properties": {
			"region": {"type": "string", "title": "Region", "enum": ["eu", "us"], "enumNames": ["Europe", "United States"]},
			"replicas": {"type": "integer", "minimum": 1, "maximum": 5},
			"notify": {"type": "boolean", "title": "Tell the team"}}}`),
	}}})
	if task.State != tessera.StateGated {
		t.Fatalf("enqueued with a gate: %s", task.State)
	}

	b := newBrowser(t, s)
	b.login(adminKey)
	gatedCount := `tr[data-queue="deploy"] td[data-count="gated"]`
	b.visible("the queue's gated count", gatedCount+` a`)
	if got := b.text(gatedCount); got != "1" {
		t.Fatalf("the queue's gated count reads %q, want 1", got)
	}
	if got := eval[string](b, `document.querySelector('`+gatedCount+` a').getAttribute("href")`); got != "#/ns/main/tasks?queue=deploy&state=gated" {
		t.Fatalf("the gated count links to %q", got)
	}
	b.shot("console-queues-gated")

	b.open("#/ns/main/task/"+task.ID, `#task-state[data-state="gated"]`)
	form := `form.gate-form[data-gate="where"]`
	b.visible("the gate's form", form)
	if got := b.text(`.gate[data-gate="where"] .gate-message`); got != "Deploy where?" {
		t.Fatalf("the gate asks %q", got)
	}
	if got := b.text(`#task-next`); !strings.Contains(got, "answer 1 gate") {
		t.Fatalf("the gated task's next step reads %q", got)
	}
	// The fields the schema asks for, the required one marked; the choices
	// by their names.
	if got := eval[string](b, `[...document.querySelectorAll('`+form+` [name]')].map((e) => e.name + ":" + (e.type || e.tagName)).join(" ")`); got != "region:select-one replicas:number notify:checkbox" {
		t.Fatalf("the form's fields: %q", got)
	}
	if got := eval[string](b, `[...document.querySelectorAll('`+form+` select[name=region] option')].map((o) => o.value + "=" + o.textContent).join(", ")`); got != "=choose…, eu=Europe, us=United States" {
		t.Fatalf("the region's choices: %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll('`+form+` label:has(select[name=region]) .req').length`); n != 1 {
		t.Fatalf("the required region is marked %d times", n)
	}
	if n := eval[int](b, `document.querySelectorAll('`+form+` label:has(input[name=replicas]) .req').length`); n != 0 {
		t.Fatalf("the optional replicas is marked required")
	}
	b.shot("console-gate-form")

	b.run("answer with 7 replicas",
		chromedp.SetValue(chromedp.CSS(form+` select[name=region]`), "eu"),
		chromedp.SetValue(chromedp.CSS(form+` input[name=replicas]`), "7"),
		chromedp.Click(chromedp.CSS(form+` input[name=notify]`)),
		chromedp.Click(chromedp.CSS(form+` button[data-answer="accept"]`)),
		chromedp.WaitVisible(chromedp.CSS(form+` .gate-error`)))
	if got := b.text(form + ` .gate-error`); !strings.Contains(got, `field "replicas": must be at most 5`) {
		t.Fatalf("the refused answer shows %q", got)
	}
	if got := eval[string](b, `document.querySelector('`+form+` input[name=replicas]').getAttribute("aria-invalid")`); got != "true" {
		t.Fatalf("the field the server named is not marked invalid (aria-invalid %q)", got)
	}
	if got := s.task("main", adminKey, task.ID); got.State != tessera.StateGated || got.Gates[0].Answer != nil {
		t.Fatalf("after the refused answer the task is %s, its gate answered %+v", got.State, got.Gates[0].Answer)
	}
	b.shot("console-gate-refused")

	b.run("answer with 3 replicas",
		chromedp.SetValue(chromedp.CSS(form+` input[name=replicas]`), "3"),
		chromedp.Click(chromedp.CSS(form+` button[data-answer="accept"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#task-state[data-state="ready"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.gate[data-gate="where"] .gate-answer[data-action="accept"]`)))
	if n := eval[int](b, `document.querySelectorAll("form.gate-form").length`); n != 0 {
		t.Fatalf("the answered gate still shows %d forms", n)
	}
	if got := b.text(`.gate[data-gate="where"] pre.gate-content`); !strings.Contains(got, `"replicas": 3`) {
		t.Fatalf("the answer's content shows as %q", got)
	}
	b.shot("console-gate-answered")

	got := s.task("main", adminKey, task.ID)
	if got.State != tessera.StateReady || len(got.Gates) != 1 || got.Gates[0].Answer == nil {
		t.Fatalf("after the answer: %s, gates %+v", got.State, got.Gates)
	}
	a := got.Gates[0].Answer
	var content map[string]any
	if err := json.Unmarshal(a.Content, &content); err != nil {
		t.Fatalf("the answer's content %s: %v", a.Content, err)
	}
	want := map[string]any{"region": "eu", "replicas": 3.0, "notify": true}
	if a.Action != tessera.GateAccept || !reflect.DeepEqual(content, want) || a.AnsweredBy == "" {
		t.Fatalf("the gate's answer: %s %s by %q, want accept %v by the admin", a.Action, a.Content, a.AnsweredBy, want)
	}
}

// Approval and url gates answer with buttons; a url gate's link opens
// apart from the console; a gate's text is the producer's, shown as text;
// and a read-only key sees the gates and nothing to answer them with.
func TestConsoleAnswersApprovalAndURLGates(t *testing.T) {
	s := newTestServer(t)
	const hostile = `<img src=x onerror=alert(1)><script>alert(2)</script>` + "\u202e" + `gnp.exe`
	task := s.enqueue("main", adminKey, map[string]any{"title": "ship", "queue": "ship", "gates": []map[string]any{
		{"key": "approve", "message": "Ship it? " + hostile},
		{"key": "login", "message": "Sign in to the registry", "url": `https://registry.example/auth?next="><script>alert(3)</script>`},
	}})
	reader, _ := s.newKey("user", "namespace:main", "read")

	b := newBrowser(t, s)
	b.login(reader)
	b.open("#/ns/main/task/"+task.ID, `.gate[data-gate="login"]`)
	if n := eval[int](b, `document.querySelectorAll("form.gate-form, button[data-answer]").length`); n != 0 {
		t.Fatalf("a read-only key sees %d answer forms and buttons", n)
	}

	b = newBrowser(t, s)
	b.login(adminKey)
	b.open("#/ns/main/task/"+task.ID, `form.gate-form[data-gate="login"]`)
	if imgs, scripts := eval[int](b, `document.querySelectorAll("img").length`), eval[int](b, `document.scripts.length`); imgs != 0 || scripts != 1 {
		t.Fatalf("%d img and %d script elements, want 0 and 1 (the page's own)", imgs, scripts)
	}
	if got := eval[string](b, `document.querySelector('.gate[data-gate="approve"] .gate-message').textContent`); got != `Ship it? <img src=x onerror=alert(1)><script>alert(2)</script>\u202Egnp.exe` {
		t.Fatalf("the hostile message shows as %q", got)
	}
	link := `.gate[data-gate="login"] a.gate-url`
	if got := eval[string](b, `["href", "target", "rel"].map((a) => document.querySelector('`+link+`').getAttribute(a)).join(" | ")`); got != `https://registry.example/auth?next="><script>alert(3)</script> | _blank | noopener noreferrer` {
		t.Fatalf("the url gate's link: %q", got)
	}
	if got := eval[string](b, `[...document.querySelectorAll('form.gate-form[data-gate="approve"] button')].map((e) => e.dataset.answer).join(" ")`); got != "accept decline" {
		t.Fatalf("the approval gate's buttons: %q", got)
	}
	b.shot("console-gate-approval-url")

	b.click("decline the approval", `form.gate-form[data-gate="approve"] button[data-answer="decline"]`,
		`.gate[data-gate="approve"] .gate-answer[data-action="decline"]`)
	b.visible("still gated on the other", `#task-state[data-state="gated"]`)
	b.click("accept the sign-in", `form.gate-form[data-gate="login"] button[data-answer="accept"]`, `#task-state[data-state="ready"]`)
	got := s.task("main", adminKey, task.ID)
	if got.State != tessera.StateReady || got.Gates[0].Answer.Action != tessera.GateDecline || got.Gates[1].Answer.Action != tessera.GateAccept {
		t.Fatalf("after the answers: %s, gates %+v", got.State, got.Gates)
	}
}
