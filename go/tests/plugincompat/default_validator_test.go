package plugincompat

import (
	"testing"

	nri "github.com/containerd/nri/pkg/adaptation"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
)

// TestDefaultValidator runs the Rust device injector (to adjust) with the
// default validator: as nri-rs's external plugin under both runtimes, and
// as upstream's builtin default validator (pkg/adaptation's
// WithDefaultValidator, served with the pinned module) under upstream's
// runtime. Accept, reject and adjustments must agree.
func TestDefaultValidator(t *testing.T) {
	const config = "rejectSysctlAdjustment: true\nrequiredPlugins: [device-injector]\n" +
		"tolerateMissingPluginsAnnotation: tolerate-missing.example.com\n"
	cfg := &validator.DefaultValidatorConfig{
		Enable:                    true,
		RejectSysctlAdjustment:    true,
		RequiredPlugins:           []string{"device-injector"},
		TolerateMissingAnnotation: "tolerate-missing.example.com",
	}
	injector := plugin{name: "device-injector", idx: "10", bin: rustBinary(t, "nri-device-injector")}
	rustValidator := plugin{name: "default-validator", idx: "05", bin: rustBinary(t, "nri-default-validator"), config: config}

	var cases caseList
	cases.add("nothing adjusted", nil, "c", nil, false)
	cases.add("device injected", map[string]string{
		"devices.noderesource.dev": "- {path: /dev/x, type: c, major: 1, minor: 3}",
	}, "c", nil, false)
	cases.add("sysctl rejected", map[string]string{"sysctl.noderesource.dev": "net.core.somaxconn: 256"}, "c", nil, true)
	cases.add("required plugin missing", map[string]string{
		"required-plugins.noderesource.dev": "[device-injector, missing-plugin]",
	}, "c", nil, true)
	cases.add("required plugin missing, per container", map[string]string{
		"required-plugins.noderesource.dev/container.c": "- 99-missing",
	}, "c", nil, true)
	cases.add("missing plugin tolerated", map[string]string{
		"required-plugins.noderesource.dev": "[missing-plugin]",
		"tolerate-missing.example.com":      "true",
	}, "c", nil, false)
	cases.add("malformed required-plugins annotation", map[string]string{
		"required-plugins.noderesource.dev": "{not: a list}",
	}, "c", nil, true)
	cases.add("malformed tolerate annotation", map[string]string{
		"required-plugins.noderesource.dev": "[missing-plugin]",
		"tolerate-missing.example.com":      "maybe",
	}, "c", nil, true)

	upstream := runGoWith(t, []plugin{injector}, []nri.Option{nri.WithDefaultValidator(cfg)}, cases)
	goRust := runGoWith(t, []plugin{injector, rustValidator}, nil, cases)
	rustRust := runRust(t, cases, injector, rustValidator)
	agree(t, cases, "go/upstream-validator", upstream, "go/rust", goRust)
	agree(t, cases, "go/upstream-validator", upstream, "rust/rust", rustRust)
	for i, c := range cases {
		if (upstream[i].err != "") != c.wantErr {
			t.Errorf("%s: upstream's validator: %s, want error: %v", c.name, upstream[i], c.wantErr)
		}
	}
}
