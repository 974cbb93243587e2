// Package wirecompat checks that nri-rs's protocol definition
// (crates/nri-api/proto/nri.proto) and the Rust types generated from it are wire-compatible
// with containerd's NRI Go package (github.com/containerd/nri/pkg/api), the
// reference implementation. The upstream side is read from the Go module
// cache at test time.
//
//   - descriptor_test.go compares the schema itself: our .proto, compiled
//     here with protocompile, against the descriptor compiled into upstream's
//     Go package.
//   - roundtrip_test.go sends messages built with upstream's Go types through
//     the nri-wire-echo Rust binary and requires that what comes back is
//     equal.
package wirecompat

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ourProtoPath is our schema, relative to this package's directory.
const ourProtoPath = "../../../crates/nri-api/proto/nri.proto"

// compileProto compiles a single self-contained .proto source.
func compileProto(t *testing.T, source string) protoreflect.FileDescriptor {
	t.Helper()
	const name = "nri.proto"
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{name: source}),
		}),
	}
	files, err := compiler.Compile(context.Background(), name)
	require.NoError(t, err, "compiling %s", name)
	require.Len(t, files, 1)
	return files[0]
}

func loadOurProto(t *testing.T) (string, protoreflect.FileDescriptor) {
	t.Helper()
	source, err := os.ReadFile(ourProtoPath)
	require.NoError(t, err, "reading our schema")
	return string(source), compileProto(t, string(source))
}

// schemaShape flattens everything of a file descriptor that matters on the
// wire (and for JSON/text names) into a map from a stable element key to a
// description of that element. Two files are compatible iff their shapes are
// equal. Fields are keyed by number, since numbers are the wire contract;
// their names are part of the description.
func schemaShape(fd protoreflect.FileDescriptor) map[string]string {
	shape := map[string]string{
		"file": fmt.Sprintf("package=%s syntax=%s", fd.Package(), fd.Syntax()),
	}
	var addEnums func(protoreflect.EnumDescriptors)
	addEnums = func(enums protoreflect.EnumDescriptors) {
		for i := 0; i < enums.Len(); i++ {
			e := enums.Get(i)
			shape["enum "+string(e.FullName())] = fmt.Sprintf("enum closed=%v", e.IsClosed())
			values := e.Values()
			for j := 0; j < values.Len(); j++ {
				v := values.Get(j)
				shape[fmt.Sprintf("enum value %s.%s", e.FullName(), v.Name())] = fmt.Sprintf("number=%d", v.Number())
			}
			for j := 0; j < e.ReservedRanges().Len(); j++ {
				r := e.ReservedRanges().Get(j)
				shape[fmt.Sprintf("enum %s reserved range %d", e.FullName(), j)] = fmt.Sprintf("%d..%d", r[0], r[1])
			}
		}
	}
	var addMessages func(protoreflect.MessageDescriptors)
	addMessages = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			m := msgs.Get(i)
			if m.IsMapEntry() {
				// Described by the map field that owns it.
				continue
			}
			shape["message "+string(m.FullName())] = "message"
			fields := m.Fields()
			for j := 0; j < fields.Len(); j++ {
				f := fields.Get(j)
				shape[fmt.Sprintf("field %s #%d", m.FullName(), f.Number())] = fieldShape(f)
			}
			oneofs := m.Oneofs()
			for j := 0; j < oneofs.Len(); j++ {
				o := oneofs.Get(j)
				var members []string
				for k := 0; k < o.Fields().Len(); k++ {
					members = append(members, fmt.Sprint(o.Fields().Get(k).Number()))
				}
				shape[fmt.Sprintf("oneof %s", o.FullName())] = fmt.Sprintf("synthetic=%v fields=%s",
					o.IsSynthetic(), strings.Join(members, ","))
			}
			for j := 0; j < m.ReservedRanges().Len(); j++ {
				r := m.ReservedRanges().Get(j)
				shape[fmt.Sprintf("message %s reserved range %d", m.FullName(), j)] = fmt.Sprintf("%d..%d", r[0], r[1]-1)
			}
			for j := 0; j < m.ExtensionRanges().Len(); j++ {
				r := m.ExtensionRanges().Get(j)
				shape[fmt.Sprintf("message %s extension range %d", m.FullName(), j)] = fmt.Sprintf("%d..%d", r[0], r[1]-1)
			}
			addEnums(m.Enums())
			addMessages(m.Messages())
		}
	}
	addEnums(fd.Enums())
	addMessages(fd.Messages())
	for i := 0; i < fd.Services().Len(); i++ {
		s := fd.Services().Get(i)
		shape["service "+string(s.FullName())] = "service"
		for j := 0; j < s.Methods().Len(); j++ {
			m := s.Methods().Get(j)
			shape[fmt.Sprintf("method %s", m.FullName())] = fmt.Sprintf("(%s%s) returns (%s%s)",
				streaming(m.IsStreamingClient()), m.Input().FullName(),
				streaming(m.IsStreamingServer()), m.Output().FullName())
		}
	}
	for i := 0; i < fd.Extensions().Len(); i++ {
		x := fd.Extensions().Get(i)
		shape["extension "+string(x.FullName())] = fieldShape(x)
	}
	return shape
}

func streaming(yes bool) string {
	if yes {
		return "stream "
	}
	return ""
}

// fieldShape describes a field: name, JSON name, cardinality, type (with the
// full name of message and enum types), map key/value types, packing,
// presence and oneof membership.
func fieldShape(f protoreflect.FieldDescriptor) string {
	var typ string
	switch {
	case f.IsMap():
		typ = fmt.Sprintf("map<%s, %s>", kindName(f.MapKey()), kindName(f.MapValue()))
	default:
		typ = fmt.Sprintf("%s %s", f.Cardinality(), kindName(f))
	}
	oneof := ""
	if o := f.ContainingOneof(); o != nil {
		oneof = " oneof=" + string(o.Name())
	}
	return fmt.Sprintf("name=%s json=%s type=%s packed=%v presence=%v%s",
		f.Name(), f.JSONName(), typ, f.IsPacked(), f.HasPresence(), oneof)
}

func kindName(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return fmt.Sprintf("%s %s", f.Kind(), f.Message().FullName())
	case protoreflect.EnumKind:
		return fmt.Sprintf("enum %s", f.Enum().FullName())
	default:
		return f.Kind().String()
	}
}

// diffShapes lists every difference between the upstream and our shapes.
func diffShapes(upstream, ours map[string]string) []string {
	keys := map[string]bool{}
	for k := range upstream {
		keys[k] = true
	}
	for k := range ours {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var diffs []string
	for _, k := range sorted {
		up, inUpstream := upstream[k]
		our, inOurs := ours[k]
		switch {
		case !inOurs:
			diffs = append(diffs, fmt.Sprintf("missing in ours: %s [%s]", k, up))
		case !inUpstream:
			diffs = append(diffs, fmt.Sprintf("extra in ours:   %s [%s]", k, our))
		case up != our:
			diffs = append(diffs, fmt.Sprintf("differs:         %s\n    upstream: %s\n    ours:     %s", k, up, our))
		}
	}
	return diffs
}

// TestDescriptorMatchesUpstream is the schema check proper: every package,
// message (nested ones included), field, enum, enum value, service and
// method of upstream's compiled descriptor must be in our proto, identical,
// and our proto must have nothing more.
func TestDescriptorMatchesUpstream(t *testing.T) {
	_, ours := loadOurProto(t)
	upstream := api.File_pkg_api_api_proto

	upShape, ourShape := schemaShape(upstream), schemaShape(ours)
	diffs := diffShapes(upShape, ourShape)
	if len(diffs) > 0 {
		t.Errorf("%s differs from upstream %s (%s) in %d places:\n%s",
			ourProtoPath, upstream.Path(), upstream.Package(), len(diffs), strings.Join(diffs, "\n"))
	}

	// Make sure the comparison is not vacuous.
	count := func(prefix string) int {
		n := 0
		for k := range upShape {
			if strings.HasPrefix(k, prefix) {
				n++
			}
		}
		return n
	}
	t.Logf("compared %d elements: %d messages, %d fields, %d enums, %d enum values, %d services, %d methods",
		len(upShape), count("message "), count("field "), count("enum ")-count("enum value "),
		count("enum value "), count("service "), count("method "))
	require.Greater(t, count("message "), 80, "upstream descriptor looks incomplete")
	require.Greater(t, count("field "), 250, "upstream descriptor looks incomplete")
	require.Equal(t, 3, count("service "))
}

// TestDescriptorTopLevelNames checks the top-level names against each other
// directly (the ttrpc service names and the echo table depend on them).
func TestDescriptorTopLevelNames(t *testing.T) {
	_, ours := loadOurProto(t)
	upstream := api.File_pkg_api_api_proto
	require.Equal(t, upstream.Package(), ours.Package())
	names := func(fd protoreflect.FileDescriptor) (msgs, enums, services []string) {
		for i := 0; i < fd.Messages().Len(); i++ {
			msgs = append(msgs, string(fd.Messages().Get(i).Name()))
		}
		for i := 0; i < fd.Enums().Len(); i++ {
			enums = append(enums, string(fd.Enums().Get(i).Name()))
		}
		for i := 0; i < fd.Services().Len(); i++ {
			services = append(services, string(fd.Services().Get(i).Name()))
		}
		sort.Strings(msgs)
		sort.Strings(enums)
		sort.Strings(services)
		return
	}
	upMsgs, upEnums, upServices := names(upstream)
	ourMsgs, ourEnums, ourServices := names(ours)
	require.Equal(t, upMsgs, ourMsgs, "top-level messages")
	require.Equal(t, upEnums, ourEnums, "top-level enums")
	require.Equal(t, upServices, ourServices, "services")
}

// TestDescriptorDiffDetectsChanges proves the comparison catches real
// incompatibilities by comparing deliberately broken copies of our proto.
func TestDescriptorDiffDetectsChanges(t *testing.T) {
	source, _ := loadOurProto(t)
	upShape := schemaShape(api.File_pkg_api_api_proto)

	mutate := func(t *testing.T, old, new string) string {
		t.Helper()
		require.Equal(t, 1, strings.Count(source, old), "mutation anchor %q must occur exactly once", old)
		return strings.Replace(source, old, new, 1)
	}
	cases := []struct {
		name, old, new string
		want           []string // substrings that must each appear in some difference
	}{
		{
			name: "renumbered field",
			old:  "int64 request_timeout = 5;",
			new:  "int64 request_timeout = 7;",
			want: []string{
				"missing in ours: field nri.pkg.api.v1alpha1.ConfigureRequest #5",
				"extra in ours:   field nri.pkg.api.v1alpha1.ConfigureRequest #7",
			},
		},
		{
			name: "changed scalar type",
			old:  "uint32 pid = 9;",
			new:  "int32 pid = 9;",
			want: []string{"differs:         field nri.pkg.api.v1alpha1.PodSandbox #9"},
		},
		{
			name: "repeated made singular",
			old:  "repeated string ips = 10;",
			new:  "string ips = 10;",
			want: []string{"differs:         field nri.pkg.api.v1alpha1.PodSandbox #10"},
		},
		{
			name: "map value type",
			old:  "map<string, FieldOwners> owners = 1;",
			new:  "map<string, CompoundFieldOwners> owners = 1;",
			want: []string{"differs:         field nri.pkg.api.v1alpha1.OwningPlugins #1"},
		},
		{
			name: "renamed field and extra message",
			old:  "  string reason = 2;\n}\n\nmessage LinuxRdt {",
			new:  "  string why = 2;\n}\n\nmessage Extra {}\n\nmessage LinuxRdt {",
			want: []string{
				"differs:         field nri.pkg.api.v1alpha1.ContainerEviction #2",
				"extra in ours:   message nri.pkg.api.v1alpha1.Extra",
			},
		},
		{
			name: "enum value renumbered",
			old:  "MPOL_F_NUMA_BALANCING = 2;",
			new:  "MPOL_F_NUMA_BALANCING = 3;",
			want: []string{"differs:         enum value nri.pkg.api.v1alpha1.MpolFlag.MPOL_F_NUMA_BALANCING"},
		},
		{
			name: "method output type",
			old:  "rpc StateChange(StateChangeEvent) returns (Empty);",
			new:  "rpc StateChange(StateChangeEvent) returns (StopContainerResponse);",
			want: []string{"differs:         method nri.pkg.api.v1alpha1.Plugin.StateChange"},
		},
		{
			name: "nested enum value dropped",
			old:  "    LEVEL_ERROR = 4;\n",
			new:  "",
			want: []string{"missing in ours: enum value nri.pkg.api.v1alpha1.LogRequest.Level.LEVEL_ERROR"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			broken := compileProto(t, mutate(t, tc.old, tc.new))
			diffs := diffShapes(upShape, schemaShape(broken))
			joined := strings.Join(diffs, "\n")
			for _, w := range tc.want {
				require.Contains(t, joined, w)
			}
		})
	}

	t.Run("several differences are all reported", func(t *testing.T) {
		src := source
		for _, m := range [][2]string{
			{"string plugin_idx = 2;", "string plugin_idx = 4;"},
			{"bool ignore_failure = 3;", "int32 ignore_failure = 3;"},
			{"message Empty {}", "message Empty {}\nmessage Extra {}"},
		} {
			require.Equal(t, 1, strings.Count(src, m[0]))
			src = strings.Replace(src, m[0], m[1], 1)
		}
		diffs := diffShapes(upShape, schemaShape(compileProto(t, src)))
		require.Len(t, diffs, 4, strings.Join(diffs, "\n"))
	})
}
