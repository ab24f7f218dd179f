package ops

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
)

// Every operation is declared whole: a name the core authorizes, a
// summary, a transport, and a reason when it is on one transport only.
// An operation on one transport and not the other fails here unless it
// says why.
func TestEveryOperationIsDeclaredWhole(t *testing.T) {
	routes := map[string]bool{}
	for _, o := range Table {
		switch {
		case o.Name == "" || o.Summary == "":
			t.Errorf("%q: name and summary are required", o.Name)
		case !core.KnownOp(o.Name):
			t.Errorf("%s: the core has no need for it (core.NeedOf falls back to admin)", o.Name)
		case o.HTTP == nil && o.Tool == nil:
			t.Errorf("%s: on no transport", o.Name)
		case (o.HTTP == nil || o.Tool == nil) && o.Only == "":
			t.Errorf("%s: on one transport without saying why (Only)", o.Name)
		case o.HTTP != nil && o.Tool != nil && o.Only != "":
			t.Errorf("%s: on both transports, but says it is on one: %q", o.Name, o.Only)
		case o.Tool != nil && o.Description == "":
			t.Errorf("%s: a tool needs a description", o.Name)
		}
		if o.HTTP == nil {
			continue
		}
		key := o.HTTP.Method + " " + o.HTTP.Path
		if routes[key] {
			t.Errorf("%s: route %s declared twice", o.Name, key)
		}
		routes[key] = true
	}
	if len(Tools()) < 20 || len(Routes()) < 40 {
		t.Errorf("%d tools and %d routes: the table lost operations", len(Tools()), len(Routes()))
	}
}

// A route's path parameters are exactly its input's path fields, so every
// segment reaches the operation and no field waits for a segment that is
// never there.
func TestPathParametersAreInputFields(t *testing.T) {
	for _, o := range Routes() {
		var fields []string
		for _, f := range o.Input().Fields {
			if f.In == input.InPath {
				fields = append(fields, f.Name)
			}
		}
		params := o.HTTP.pathParams()
		slices.Sort(fields)
		slices.Sort(params)
		if !slices.Equal(fields, params) {
			t.Errorf("%s %s: path parameters %v, input path fields %v", o.HTTP.Method, o.HTTP.Path, params, fields)
		}
		for _, f := range o.Input().Fields {
			if f.In == input.InPath && f.Type.Kind() != reflect.String {
				t.Errorf("%s: path field %s is %v, not a string", o.Name, f.Name, f.Type)
			}
			if (f.In == input.InQuery || f.In == input.InPath || f.In == input.InHeader) && f.Elem != nil {
				t.Errorf("%s: %s field %s is an object", o.Name, f.In, f.Name)
			}
		}
	}
}

// Every input field is bounded (SPEC §5: every JSON field has a bound):
// a string by a length, a format or a set of values; a number by a range;
// a list by its length and its items; a JSON value by its size. Booleans
// and times bound themselves.
func TestEveryInputFieldIsBounded(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(o *Op, ty *input.Type)
	walk = func(o *Op, ty *input.Type) {
		if seen[ty.Go] {
			return
		}
		seen[ty.Go] = true
		for _, f := range ty.Fields {
			if f.Elem != nil {
				walk(o, f.Elem)
				if f.Type.Kind() == reflect.Slice && f.Bound.Max() == 0 {
					t.Errorf("%s: list %s.%s has no length bound", o.Name, ty.Go.Name(), f.Name)
				}
				continue
			}
			typ := f.Type
			for typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			kw := f.Bound.Keywords()
			bounded := true
			switch {
			case typ == reflect.TypeFor[json.RawMessage]():
				bounded = f.Bound.Max() > 0
			case typ.Kind() == reflect.String:
				bounded = kw["maxLength"] != nil || kw["enum"] != nil || kw["pattern"] != nil && f.Bound.Max() > 0
			case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64, typ.Kind() == reflect.Float64:
				bounded = kw["minimum"] != nil
			case typ.Kind() == reflect.Slice:
				bounded = f.Bound.Max() > 0 && kw["items"] != nil
			case typ.Kind() == reflect.Bool, typ == reflect.TypeFor[time.Time]():
			default:
				t.Errorf("%s: field %s.%s of an unexpected type %v", o.Name, ty.Go.Name(), f.Name, typ)
			}
			if !bounded {
				t.Errorf("%s: field %s.%s (%v) has no bound", o.Name, ty.Go.Name(), f.Name, f.Type)
			}
			if f.Doc() == "" {
				t.Errorf("%s: field %s.%s is not described", o.Name, ty.Go.Name(), f.Name)
			}
		}
	}
	for _, o := range Table {
		walk(o, o.Input())
	}
}

// An operation's output is what its route answers: JSON of the declared
// type, or a documented 204.
func TestOutputsAreDeclared(t *testing.T) {
	for _, o := range Routes() {
		switch {
		case o.Out == nil && o.HTTP.Status != 204:
			t.Errorf("%s: no output, but answers %d", o.Name, o.HTTP.Status)
		case o.HTTP.Empty != nil && o.HTTP.NoContent == "":
			t.Errorf("%s: may answer empty without saying when", o.Name)
		case o.HTTP.StatusOf != nil && len(o.HTTP.Also) == 0:
			t.Errorf("%s: chooses its status, but declares no other", o.Name)
		}
		if strings.Contains(o.HTTP.Path, "//") || !strings.HasPrefix(o.HTTP.Path, "/") {
			t.Errorf("%s: path %q", o.Name, o.HTTP.Path)
		}
	}
}
