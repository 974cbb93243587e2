package plugincompat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// TestV010Adapter checks the NRI v0.1.0 requests the adapter sends its
// one-shot plugins for a pod's and a container's start and stop: the same
// bytes from nri-rs's adapter under both runtimes, from upstream's adapter,
// and as written here from upstream's v0.1.0 client.
func TestV010Adapter(t *testing.T) {
	root := t.TempDir()
	binDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "conf.json")
	if err := os.WriteFile(conf, []byte(`{"version": "0.1",
	  "plugins": [{"type": "recorder", "conf": {"b": [true, null], "a": "x y"}}, {"type": "recorder"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The v0.1.0 plugin: records each request as a line, answers OK.
	script := "#!/bin/sh\ncat >> \"$NRI_V010_RECORD\"\necho >> \"$NRI_V010_RECORD\"\n" +
		"echo '{\"plugin\":\"recorder\",\"version\":\"0.1\",\"metadata\":{\"seen\":\"yes\"}}'\n"
	if err := os.WriteFile(filepath.Join(binDir, "recorder"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	var cases caseList
	c := cases.add("pod and container", map[string]string{"z.example.com/b": "2", "a.example.com/a": "1"}, "c", nil, false)
	c.pod.Pid = 4242
	c.pod.Labels = map[string]string{"app": "web", "tier": "front"}
	c.pod.Linux.CgroupsPath = "/kubepods/pod0"
	c.pod.Linux.Namespaces = []*api.LinuxNamespace{{Type: "network", Path: "/var/run/netns/x"}, {Type: "ipc"}}
	c.pod.Linux.Resources = &api.LinuxResources{
		Memory: &api.LinuxMemory{Limit: api.Int64(int64(1 << 30))},
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(uint64(1024)), Cpus: "0-3"},
		Pids:   &api.LinuxPids{Limit: 100},
	}
	c.ctr.Linux = &api.LinuxContainer{
		CgroupsPath: "/kubepods/pod0/ctr0",
		Resources:   &api.LinuxResources{Unified: map[string]string{"memory.high": "max"}, HugepageLimits: []*api.HugepageLimit{{PageSize: "2MB", Limit: 4}}},
	}
	c.ctr.Annotations = map[string]string{"io.kubernetes.container.name": "c"}

	const podSpec = `"spec":{"resources":{"memory":{"limit":1073741824},"cpu":{"shares":1024,"cpus":"0-3"},"pids":{"limit":100}},` +
		`"namespaces":{"ipc":"","network":"/var/run/netns/x"},"cgroupsPath":"/kubepods/pod0","annotations":{"a.example.com/a":"1","z.example.com/b":"2"}}`
	const ctrSpec = `"spec":{"resources":{"memory":{},"cpu":{},"hugepageLimits":[{"pageSize":"2MB","limit":4}],"unified":{"memory.high":"max"}},` +
		`"cgroupsPath":"/kubepods/pod0/ctr0","annotations":{"io.kubernetes.container.name":"c"}}`
	const labels = `"labels":{"app":"web","tier":"front"}`
	const first = `"conf":{"b":[true,null],"a":"x y"},`
	const result = `"results":[{"plugin":"recorder","version":"0.1","error":"","metadata":{"seen":"yes"}}]`
	req := func(state, id string, pid bool, spec string) []string {
		p := ""
		if pid {
			p = `"pid":4242,`
		}
		head := `"version":"0.1","state":"` + state + `","id":"` + id + `","sandboxID":"pod0",` + p + spec + "," + labels
		return []string{"{" + first + head + "}", "{" + head + "," + result + "}"}
	}
	var want []string
	want = append(want, req("create", "pod0", true, podSpec)...)
	want = append(want, req("create", "ctr0", false, ctrSpec)...)
	want = append(want, req("delete", "ctr0", false, ctrSpec)...)
	want = append(want, req("delete", "pod0", true, podSpec)...)

	run := func(name string, p plugin, rust bool) {
		record := filepath.Join(root, name+".jsonl")
		p.env = append(p.env, "NRI_V010_RECORD="+record, "PATH="+binDir+":"+os.Getenv("PATH"))
		if rust {
			runRust(t, cases, p)
		} else {
			runGo(t, &p, nil, cases)
		}
		data, err := os.ReadFile(record)
		if err != nil {
			t.Fatalf("%s: no request recorded: %v", name, err)
		}
		got := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(got) != len(want) {
			t.Fatalf("%s: %d requests, want %d:\n%s", name, len(got), len(want), data)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: request %d:\n got %s\nwant %s", name, i, got[i], want[i])
			}
		}
	}
	rust := plugin{name: "v010-adapter", idx: "10", bin: rustBinary(t, "nri-v010-adapter"),
		args: []string{"-conf", conf, "-bin-dir", binDir}}
	run("go-rust", rust, false)
	run("rust-rust", rust, true)
	if bin := upstreamPlugin(t, "v010-adapter"); bin != "" {
		// Upstream reads /etc/nri/conf.json: give it ours in a private
		// mount namespace (a tmpfs over /etc there, nothing on the host).
		unshare, err := exec.LookPath("unshare")
		if err != nil || os.Geteuid() != 0 {
			t.Skipf("upstream v010-adapter needs root and unshare (%v)", err)
		}
		up := rust
		up.bin = unshare
		up.args = []string{"-m", "--propagation", "private", "/bin/sh", "-c",
			"mount -t tmpfs tmpfs /etc && mkdir /etc/nri && cat " + shellQuote(conf) + " > /etc/nri/conf.json && exec " + shellQuote(bin)}
		run("go-upstream", up, false)
	}
}
