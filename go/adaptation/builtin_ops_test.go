package adaptation

// The tests of this file run against every NRI release go/adaptation
// builds against (tests/conformance/build-against.sh): they name nothing a
// release may lack.

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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

// handled is what a recording handler saw: its name and the ids of the pod and
// the container of its request.
type handled struct{ name, pod, container string }

// recordingHandlers sets every handler of BuiltinHandlers to one that
// records its call, whatever its signature, and answers with empty
// responses.
func recordingHandlers(called *[]handled) builtin.BuiltinHandlers {
	var h builtin.BuiltinHandlers
	v := reflect.ValueOf(&h).Elem()
	for i := 0; i < v.NumField(); i++ {
		name, typ := v.Type().Field(i).Name, v.Field(i).Type()
		v.Field(i).Set(reflect.MakeFunc(typ, func(args []reflect.Value) []reflect.Value {
			c := handled{name: name}
			if req, ok := args[1].Interface().(interface{ GetPod() *api.PodSandbox }); ok {
				c.pod = req.GetPod().GetId()
			}
			if req, ok := args[1].Interface().(interface{ GetContainer() *api.Container }); ok {
				c.container = req.GetContainer().GetId()
			}
			*called = append(*called, c)
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

// eventRequest encodes what the core sends a builtin plugin for an event:
// pod = 1 and, for a container's event, container = 2, in every request.
func eventRequest(t *testing.T, name string) (data []byte, pod, container string) {
	t.Helper()
	field := func(num protowire.Number, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		data = protowire.AppendTag(data, num, protowire.BytesType)
		data = protowire.AppendBytes(data, b)
	}
	pod = "pod-of-" + name
	field(1, &api.PodSandbox{Id: pod})
	if !strings.Contains(name, "POD_SANDBOX") {
		container = "container-of-" + name
		field(2, &api.Container{Id: container})
	}
	return data, pod, container
}

// The builtin op table is numbered by hand after nri.h's nri_builtin_op,
// whose event ops carry the numbers of api.Event (the Rust side checks
// that), in two tables (builtinOps and builtinStateOps). Here: every event number reaches the handler of that event's
// name with the request's pod and container, and the only other ops are
// Configure and Synchronize.
func TestBuiltinOpsFollowTheAPIsEvents(t *testing.T) {
	byNumber := map[uint32]func(context.Context, *builtin.BuiltinPlugin, []byte) (interface{}, error){}
	add := func(op uint32, call func(context.Context, *builtin.BuiltinPlugin, []byte) (proto.Message, error)) {
		if _, twice := byNumber[op]; twice {
			t.Errorf("builtin op %d is in both tables", op)
		}
		byNumber[op] = func(ctx context.Context, b *builtin.BuiltinPlugin, in []byte) (interface{}, error) {
			return call(ctx, b, in)
		}
	}
	for op, call := range builtinOps {
		add(uint32(op), call)
	}
	for op, call := range builtinStateOps {
		add(uint32(op), call)
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
		var called []handled
		b := &builtin.BuiltinPlugin{Base: "ops", Index: "00", Handlers: recordingHandlers(&called)}
		req, pod, container := eventRequest(t, name)
		if _, err := call(context.Background(), b, req); err != nil {
			t.Errorf("op %d (%s): %v", n, name, err)
		}
		if want := (handled{camel(name), pod, container}); len(called) != 1 || called[0] != want {
			t.Errorf("op %d (%s) called %+v, want [%+v]", n, name, called, want)
		}
	}
	if extra := len(byNumber) - events; extra != 2 {
		t.Errorf("%d builtin ops besides the %d events, want 2 (Configure, Synchronize)", extra, events)
	}
	for _, want := range []string{"Configure", "Synchronize"} {
		var called []handled
		b := &builtin.BuiltinPlugin{Base: "ops", Index: "00", Handlers: recordingHandlers(&called)}
		found := false
		for n, call := range byNumber {
			if n < uint32(api.Event_LAST) {
				continue
			}
			called = called[:0]
			_, _ = call(context.Background(), b, nil)
			if len(called) == 1 && called[0].name == want {
				found = true
			}
		}
		if !found {
			t.Errorf("no builtin op calls %s", want)
		}
	}
}
