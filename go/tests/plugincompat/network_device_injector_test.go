package plugincompat

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// TestNetworkDeviceInjector compares what the plugin decides on
// RunPodSandbox (it adjusts no container). Moving real devices is tested
// by the plugin's own tests, in namespaces of their own.
func TestNetworkDeviceInjector(t *testing.T) {
	var cases caseList
	withNetns := func(c *testCase, path string) {
		c.pod.Linux.Namespaces = []*api.LinuxNamespace{{Type: "ipc"}, {Type: "network", Path: path}}
	}
	// Nothing here exists, so nothing is ever moved: a failed injection is
	// logged and the pod starts, as upstream.
	const noNetns = "/nonexistent/nri-compat/netns"
	dev := "- name: nri-nonexist0\n  new_name: eth33\n  address: 192.168.2.2\n  prefix: 24\n  mtu: 1500\n"
	withNetns(cases.add("no annotation", nil, "c", nil, false), noNetns)
	withNetns(cases.add("device that does not exist", map[string]string{"netdevice.noderesource.dev": dev}, "c", nil, false), noNetns)
	withNetns(cases.add("deprecated pod key", map[string]string{"netdevices.nri.containerd.io/pod": dev}, "c", nil, false), noNetns)
	withNetns(cases.add("README's key is not the code's", map[string]string{"netdevices.noderesource.dev": "- name: [bad"}, "c", nil, false), noNetns)
	c := cases.add("host-network pod", map[string]string{"netdevice.noderesource.dev": dev}, "c", nil, false)
	c.wantRunErr = true
	c = cases.add("bad address", map[string]string{"netdevice.noderesource.dev": "- name: d\n  address: 300.1.1.1\n"}, "c", nil, false)
	withNetns(c, noNetns)
	c.wantRunErr = true
	c = cases.add("malformed annotation", map[string]string{"netdevice.noderesource.dev/pod": "name: d"}, "c", nil, false)
	withNetns(c, noNetns)
	c.wantRunErr = true
	compare(t, plugin{name: "network-device-injector", idx: "10", bin: rustBinary(t, "nri-network-device-injector")},
		"network-device-injector", nil, cases)
}
