package plugincompat

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// Upstream's hook-injector reads these fixed directories.
const (
	hookDefaultDir  = "/usr/share/containers/oci/hooks.d"
	hookOverrideDir = "/etc/containers/oci/hooks.d"
)

func TestHookInjector(t *testing.T) {
	root := t.TempDir()
	defDir, ovrDir := filepath.Join(root, "default"), filepath.Join(root, "override")
	files := map[string]string{
		"default/10-always.json": `{"version": "1.0.0",
			"hook": {"path": "/bin/sh", "args": ["sh", "-c", "echo always"], "env": ["A=1"]},
			"when": {"always": true}, "stages": ["prestart", "poststop"]}`,
		"default/20-busybox.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["busybox"]},
			"when": {"commands": ["busybox$"]}, "stages": ["prestart"]}`,
		"default/30-annotated.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["annotated"], "timeout": 7},
			"when": {"annotations": {"^hook\\.example\\.com/inject$": "^yes$"}}, "stages": ["createContainer"]}`,
		"default/40-bind.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["bind"]},
			"when": {"hasBindMounts": true}, "stages": ["startContainer"]}`,
		"default/50-old.json": `{"hook": "/bin/sh", "arguments": ["-c", "old"], "stage": ["poststart"],
			"annotation": ["^debug$"]}`,
		"default/60-missing.json": `{"version": "1.0.0", "hook": {"path": "/no/such/hook"},
			"when": {"always": true}, "stages": ["prestart"]}`,
		"default/70-override.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["default"]},
			"when": {"always": true}, "stages": ["poststop"]}`,
		"override/70-override.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["override"]},
			"when": {"always": true}, "stages": ["poststop"]}`,
		"override/Y.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["Y"]},
			"when": {"always": true}, "stages": ["poststop"]}`,
		"override/x.json": `{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["x"]},
			"when": {"always": true}, "stages": ["poststop"]}`,
		"override/readme.txt": "not a hook",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	hook := func(args ...string) *api.Hook { return &api.Hook{Path: "/bin/sh", Args: args} }
	always := &api.Hook{Path: "/bin/sh", Args: []string{"sh", "-c", "echo always"}, Env: []string{"A=1"}}
	// Hooks every container gets, in file-name order (lower-cased):
	// 10-always, 70-override (from the override directory), x, Y.
	base := func(h *api.Hooks) *api.Hooks {
		h.CreateRuntime = append([]*api.Hook{always}, h.CreateRuntime...)
		h.Poststop = append(h.Poststop, always, hook("override"), hook("x"), hook("Y"))
		return h
	}
	want := func(h *api.Hooks) *api.ContainerAdjustment {
		a := &api.ContainerAdjustment{}
		a.AddHooks(base(h))
		return a
	}
	var cases caseList
	cases.add("always and overridden hooks", nil, "c", want(&api.Hooks{}), false)
	c := cases.add("command match", nil, "c", want(&api.Hooks{CreateRuntime: []*api.Hook{hook("busybox")}}), false)
	c.want.Hooks.CreateRuntime = []*api.Hook{always, hook("busybox")}
	c.ctr.Args = []string{"/bin/busybox", "sh"}
	cases.add("pod annotation match", map[string]string{"hook.example.com/inject": "yes"}, "c",
		want(&api.Hooks{CreateContainer: []*api.Hook{{Path: "/bin/sh", Args: []string{"annotated"}, Timeout: api.Int(7)}}}), false)
	c = cases.add("container annotation match", nil, "c",
		want(&api.Hooks{CreateContainer: []*api.Hook{{Path: "/bin/sh", Args: []string{"annotated"}, Timeout: api.Int(7)}}}), false)
	c.ctr.Annotations = map[string]string{"hook.example.com/inject": "yes"}
	c = cases.add("pod annotation overrides container's", map[string]string{"hook.example.com/inject": "no"}, "c",
		want(&api.Hooks{}), false)
	c.ctr.Annotations = map[string]string{"hook.example.com/inject": "yes"}
	c = cases.add("bind mounts", nil, "c", want(&api.Hooks{StartContainer: []*api.Hook{hook("bind")}}), false)
	c.ctr.Mounts = []*api.Mount{{Source: "/a", Destination: "/b", Type: "bind", Options: []string{"rbind"}}}
	cases.add("0.1.0 hook on any annotation value", map[string]string{"log-level": "debug"}, "c",
		want(&api.Hooks{Poststart: []*api.Hook{hook("/bin/sh", "-c", "old")}}), false)
	c = cases.add("no command: matching fails", nil, "c", nil, true)
	c.ctr.Args = nil

	rust := plugin{name: "hook-injector", idx: "10", bin: rustBinary(t, "nri-hook-injector"),
		args: []string{"-default-dir", defDir, "-override-dir", ovrDir}}
	compareWith(t, rust, "hook-injector", func(bin string) plugin {
		// Upstream reads fixed directories: give it ours in a private
		// mount namespace.
		unshare, err := exec.LookPath("unshare")
		if err != nil || os.Geteuid() != 0 {
			t.Skipf("upstream hook-injector needs root and unshare to see test hooks (%v)", err)
		}
		for _, d := range []string{hookDefaultDir, hookOverrideDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Skipf("cannot create %s: %v", d, err)
			}
		}
		script := "mount --bind " + shellQuote(defDir) + " " + hookDefaultDir +
			" && mount --bind " + shellQuote(ovrDir) + " " + hookOverrideDir +
			" && exec " + shellQuote(bin) + " -disableWatch"
		up := rust
		up.bin, up.args = unshare, []string{"-m", "--propagation", "private", "/bin/sh", "-c", script}
		return up
	}, cases)
}
