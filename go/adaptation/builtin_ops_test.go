package adaptation

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
)

// camel turns an api.Event name (RUN_POD_SANDBOX) into the name of its
// handler (RunPodSandbox).
func camel(name string) string {
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		b.WriteString(w[:1] + strings.ToLower(w[1:]))
	}
	return b.String()
}

// recordingHandlers sets every handler of BuiltinHandlers to one that
// records its field name, whatever its signature, and answers with
// empty responses.
func recordingHandlers(called *[]string) builtin.BuiltinHandlers {
	var h builtin.BuiltinHandlers
	v := reflect.ValueOf(&h).Elem()
	for i := 0; i < v.NumField(); i++ {
		name, typ := v.Type().Field(i).Name, v.Field(i).Type()
		v.Field(i).Set(reflect.MakeFunc(typ, func([]reflect.Value) []reflect.Value {
			*called = append(*called, name)
			out := make([]reflect.Value, typ.NumOut())
			for j := range out {
				// An empty response, not nil: BuiltinPlugin reads it.
				if rt := typ.Out(j); rt.Kind() == reflect.Ptr {
					out[j] = reflect.New(rt.Elem())
				} else {
					out[j] = reflect.Zero(rt)
				}
			}
			return out
		}))
	}
	return h
}

// The builtin op table is numbered by hand after nri.h's nri_builtin_op,
// whose event ops carry the numbers of api.Event (the Rust side checks
// that). Here: every event number reaches the handler of that event's
// name, and the only other ops are Configure and Synchronize.
func TestBuiltinOpsFollowTheAPIsEvents(t *testing.T) {
	byNumber := map[uint32]func(context.Context, *builtin.BuiltinPlugin, []byte) (interface{}, error){}
	for op, call := range builtinOps {
		call := call
		byNumber[uint32(op)] = func(ctx context.Context, b *builtin.BuiltinPlugin, in []byte) (interface{}, error) {
			return call(ctx, b, in)
		}
	}
	events := 0
	for n, name := range api.Event_name {
		if n <= int32(api.Event_UNKNOWN) || n >= int32(api.Event_LAST) {
			continue
		}
		events++
		call, ok := byNumber[uint32(n)]
		if !ok {
			t.Errorf("no builtin op numbered %d (%s)", n, name)
			continue
		}
		var called []string
		b := &builtin.BuiltinPlugin{Base: "ops", Index: "00", Handlers: recordingHandlers(&called)}
		if _, err := call(context.Background(), b, nil); err != nil {
			t.Errorf("op %d (%s): %v", n, name, err)
		}
		if want := camel(name); len(called) != 1 || called[0] != want {
			t.Errorf("op %d (%s) called %v, want [%s]", n, name, called, want)
		}
	}
	if extra := len(byNumber) - events; extra != 2 {
		t.Errorf("%d builtin ops besides the %d events, want 2 (Configure, Synchronize)", extra, events)
	}
	for _, want := range []string{"Configure", "Synchronize"} {
		var called []string
		b := &builtin.BuiltinPlugin{Base: "ops", Index: "00", Handlers: recordingHandlers(&called)}
		found := false
		for n, call := range byNumber {
			if n < uint32(api.Event_LAST) {
				continue
			}
			called = called[:0]
			_, _ = call(context.Background(), b, nil)
			if len(called) == 1 && called[0] == want {
				found = true
			}
		}
		if !found {
			t.Errorf("no builtin op calls %s", want)
		}
	}
}
