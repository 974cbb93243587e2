//go:build cgo

package adaptation

// #include <stdlib.h>
// #include "nri.h"
import "C"

import (
	"encoding/json"
	"fmt"
	"time"
	"unsafe"
)

// The options below are nri-rs's own: upstream's adaptation has none of
// them, so a runtime that uses one no longer builds against upstream's
// package. Each is off unless set, leaving upstream's behaviour.

// WithEventTimeout gives every event a time budget: each plugin call waits
// at most what is left of it (or the request timeout, if that is less).
// When the budget runs out the event fails with an error saying so
// ("CreateContainer exceeded the NRI event time budget of 1s") and no
// plugin is dropped for it. Without it, as upstream, K plugins that each
// answer just within the request timeout make an event K timeouts long.
func WithEventTimeout(budget time.Duration) Option {
	return func(r *Adaptation) error {
		if budget < time.Millisecond {
			return fmt.Errorf("event timeout %v is below 1ms", budget)
		}
		r.eventTimeout = budget
		return nil
	}
}

// WithPluginRequestTimeout gives one plugin a request timeout of its own,
// instead of the one SetPluginRequestTimeout sets for all: every request
// to the plugin (Configure, events, validation) may take that long, and
// the plugin is told it in Configure. Its Synchronize gets at least as
// long, unless a sync timeout is set (WithPluginSyncTimeout). plugin is its idx-name or its name alone; the idx-name wins.
// Use it once per plugin. It overrides a pre-installed plugin's runtime
// drop-in, <idx>-<name>.runtime.yaml next to its .conf with a Go duration
// under requestTimeout. Without either, as upstream, all plugins share one
// timeout.
func WithPluginRequestTimeout(plugin string, timeout time.Duration) Option {
	return func(r *Adaptation) error {
		if plugin == "" {
			return fmt.Errorf("plugin request timeout: empty plugin name")
		}
		if timeout < time.Millisecond {
			return fmt.Errorf("request timeout %v of plugin %q is below 1ms", timeout, plugin)
		}
		if r.pluginTimeouts == nil {
			r.pluginTimeouts = map[string]time.Duration{}
		}
		r.pluginTimeouts[plugin] = timeout
		return nil
	}
}

// WithPluginSyncTimeout sets how long a plugin's Synchronize may take, all
// its messages together, for every plugin without one of its own
// (WithPluginSyncTimeoutFor). It is used as is, however big the node.
// Without it, a sync may take the registration timeout, or the plugin's
// request timeout if that is longer, plus 1ms for each pod and container
// sent: the joining plugin gets the whole node in that one request, and a
// Go-stub plugin was measured taking a tenth of that per object. Upstream
// gives Synchronize the request timeout, which resource-policy plugins
// miss on big nodes, to be dropped, reconnect and miss it again.
func WithPluginSyncTimeout(timeout time.Duration) Option {
	return func(r *Adaptation) error {
		if timeout < time.Millisecond {
			return fmt.Errorf("sync timeout %v is below 1ms", timeout)
		}
		r.syncTimeout = timeout
		return nil
	}
}

// WithPluginSyncTimeoutFor gives one plugin a sync timeout of its own,
// used as is instead of WithPluginSyncTimeout's or the default one. plugin
// is its idx-name or its name alone; the idx-name wins. It overrides a
// pre-installed plugin's runtime drop-in (syncTimeout, beside
// requestTimeout, see WithPluginRequestTimeout), and leaves the plugin's
// request timeout alone.
func WithPluginSyncTimeoutFor(plugin string, timeout time.Duration) Option {
	return func(r *Adaptation) error {
		if plugin == "" {
			return fmt.Errorf("plugin sync timeout: empty plugin name")
		}
		if timeout < time.Millisecond {
			return fmt.Errorf("sync timeout %v of plugin %q is below 1ms", timeout, plugin)
		}
		if r.pluginSyncTimeouts == nil {
			r.pluginSyncTimeouts = map[string]time.Duration{}
		}
		r.pluginSyncTimeouts[plugin] = timeout
		return nil
	}
}

// WithShutdownOnStop makes Stop send every connected plugin the Shutdown
// request of the NRI protocol, all at once and waiting at most one request
// timeout in all, before it closes their connections, so a plugin can
// tell a runtime stopping from a connection lost. Without it, as upstream,
// no plugin is ever sent Shutdown. Builtin plugins get none (upstream's
// builtin Shutdown does nothing).
func WithShutdownOnStop() Option {
	return func(r *Adaptation) error {
		r.shutdownOnStop = true
		return nil
	}
}

// WithRequiredPluginsGuardingPods makes the default validator's required
// plugins (WithDefaultValidator) guard pods as they guard containers:
// RunPodSandbox fails, before any plugin sees the pod, when a required
// plugin is absent, and after, when one was dropped during it (a timeout,
// a lost connection), with the container check's reason (validator
// "00-default-validator" rejected pod sandbox, reason: validation error:
// required plugin "p" not present). The pod's own annotations count in
// their pod-wide forms. Without it, as upstream, pods go through whatever
// plugins are there.
func WithRequiredPluginsGuardingPods() Option {
	return func(r *Adaptation) error {
		r.guardPods = true
		return nil
	}
}

// WithPluginsActivatedWithinSync is kept for runtimes that set it; it
// changes nothing. A plugin that connects is made active as soon as it has
// answered its Synchronize, while the runtime's SyncFn still runs, once
// the events it missed since its sync began were replayed to it: each pod
// and container reaches it once, in its snapshot or as events. Upstream
// activates it after SyncFn returned and loses what happened in between.
func WithPluginsActivatedWithinSync() Option {
	return func(r *Adaptation) error {
		r.activateWithinSync = true
		return nil
	}
}

// WithPodConcurrency lets events of different pods run at once; those of
// one pod still run one at a time and in order. Only the plugins named
// here (by idx-name or name), and pre-installed ones whose runtime drop-in
// says concurrentRequests: true, are sent requests of different pods at
// once; every other plugin gets one request at a time, as under upstream,
// which runs every event of every pod in turn. Each event's merge,
// conflicts, validation and audit record stay its own.
func WithPodConcurrency(concurrentPlugins ...string) Option {
	return func(r *Adaptation) error {
		r.podConcurrency = true
		r.concurrentPlugins = append(r.concurrentPlugins, concurrentPlugins...)
		return nil
	}
}

// WithPluginHandover makes a plugin that registers under the idx-name of
// a connected one replace it once synchronized: the new instance joins and
// the old one leaves the plugin list in one step, so each event reaches
// exactly one of them and none reaches neither (a plugin upgrade without
// a gap). The old instance is closed once the events it was already in
// have ended; with WithShutdownOnStop it is sent Shutdown first, waiting
// one request timeout at most. Without it, as upstream, both stay
// connected and each event reaches both.
func WithPluginHandover() Option {
	return func(r *Adaptation) error {
		r.pluginHandover = true
		return nil
	}
}

// PluginIdentityRule grants the identities it describes the plugin names in
// Plugins (an idx-name, a name whatever the index, or "*" for any). An
// identity is what the kernel says of a plugin's process when it connects:
// each criterion given must hold (its uid among UIDs, its gid among GIDs,
// its executable among Executables, its cgroup at or below one of
// Cgroups); one left empty holds for anyone.
type PluginIdentityRule struct {
	Plugins     []string
	UIDs        []uint32
	GIDs        []uint32
	Executables []string
	Cgroups     []string
}

// WithPluginIdentities makes the adaptation check who registers external
// plugins: a plugin may register under a name only if one of rules grants
// its identity that name, and only while no other live plugin holds the
// name, whatever its index (so "99-foo" cannot stand in for a required
// "foo", nor anyone for the builtin default validator). With
// WithPluginHandover, a new instance of the same idx-name, uid, gid and
// executable may take a name over. A refused plugin is told why and
// disconnected. Builtin, pre-installed and WASM plugins are not checked,
// but hold their names too. Given no rules, no external plugin may
// register. Without it, as upstream, any process that can reach the
// socket may register under any name.
func WithPluginIdentities(rules ...PluginIdentityRule) Option {
	return func(r *Adaptation) error {
		for i, rule := range rules {
			if len(rule.Plugins) == 0 {
				return fmt.Errorf("plugin identity rule %d names no plugins", i)
			}
		}
		r.identities = append([]PluginIdentityRule{}, rules...)
		return nil
	}
}

// identityPolicyJSON encodes rules as the core's policy.
func identityPolicyJSON(rules []PluginIdentityRule) (string, error) {
	type rule struct {
		Plugins     []string `json:"plugins"`
		UIDs        []uint32 `json:"uids,omitempty"`
		GIDs        []uint32 `json:"gids,omitempty"`
		Executables []string `json:"executables,omitempty"`
		Cgroups     []string `json:"cgroups,omitempty"`
	}
	policy := struct {
		Rules []rule `json:"rules"`
	}{Rules: []rule{}}
	for _, r := range rules {
		policy.Rules = append(policy.Rules, rule(r))
	}
	b, err := json.Marshal(policy)
	return string(b), err
}

// PluginPermissions says what the default validator lets some plugins
// change: Plugins are idx-names, names whatever the index, or "*"; Allow
// lists kinds of change ("annotations", "mounts", "ociHooks", "devices",
// "env", "args", "resources", "cgroupsPath", "oomScoreAdj", "rlimits",
// "ioPriority", "seccomp", "namespaces", "sysctls", "netDevices",
// "scheduler"). MountSources, if not nil, are the only host paths (and
// what lies below them) the plugins may mount from; an empty, non-nil
// list allows none.
type PluginPermissions struct {
	Plugins      []string
	Allow        []string
	MountSources []string
}

// WithDefaultValidatorPluginPermissions gives the default validator
// (WithDefaultValidator) per-plugin permissions, its configuration's
// pluginPermissions, which upstream's DefaultValidatorConfig cannot carry:
// a container adjustment then passes only if each change is of a kind the
// entry for the plugin that made it allows (the first entry naming its
// idx-name, else its name, else "*"; none: it may change nothing), on top
// of the global switches. Without it, as upstream, every plugin may change
// everything the global switches allow.
func WithDefaultValidatorPluginPermissions(perms ...PluginPermissions) Option {
	return func(r *Adaptation) error {
		r.permissions = append([]PluginPermissions{}, perms...)
		return nil
	}
}

// permissionsJSON renders perms with the configuration's keys; a nil
// MountSources is left out (any source), an empty one kept (none).
func permissionsJSON(perms []PluginPermissions) []map[string]any {
	out := make([]map[string]any, 0, len(perms))
	for _, p := range perms {
		entry := map[string]any{"plugins": nonNil(p.Plugins), "allow": nonNil(p.Allow)}
		if p.MountSources != nil {
			entry["mountSources"] = p.MountSources
		}
		out = append(out, entry)
	}
	return out
}

// nonNil keeps a nil list a list in JSON, where null would mean "not set".
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// AuditFunc is given each audit record as one line of JSON. It runs on a
// thread of the core's own, one record at a time in event order, and may
// take its time: events wait for it only once 1024 records are queued.
type AuditFunc func(record []byte)

// WithAuditLog keeps an audit log, passing each record to fn: one per
// CreateContainer, UpdateContainer or StopContainer in which a plugin
// changed something or a validator refused, and one per update a plugin
// asks for on its own. A record names the event, the pod and container,
// the outcome ("applied", "rejected", "failed", "partial"), every field
// changed with the plugin that changed it, the merged values (environment
// values redacted unless WithAuditEnvValues), each validator's verdict and
// the plugins' identities. Records are deterministic and at most 64 KiB
// (WithAuditRecordLimit). docs/THREAT-MODEL.md describes the fields. Without
// it, as upstream, nothing is recorded.
func WithAuditLog(fn AuditFunc) Option {
	return func(r *Adaptation) error {
		if fn == nil {
			return fmt.Errorf("audit log: nil function")
		}
		r.audit = fn
		return nil
	}
}

// WithWasmCacheDir is where the core finds WASM plugins' compiled modules
// (default /var/cache/nri/wasm), which nri-wasm-compile puts there in a
// node's setup (or the runtime itself, with WithWasmCompiledAtStart): a
// module found there runs as wasmtime's Cranelift compiled it, about three
// times faster than on wazero, and starts in milliseconds; one not found
// there runs on wazero, as upstream runs it. Plugins see no difference. An
// empty dir keeps no cache. The directory is created 0700 if missing, and
// not used if another user owns it or others may write to it.
func WithWasmCacheDir(dir string) Option {
	return func(r *Adaptation) error {
		r.wasmCacheDir = &dir
		return nil
	}
}

// WithWasmCompiledAtStart compiles, at the runtime's start, the WASM
// modules that the cache (WithWasmCacheDir) does not hold, with wasmtime's
// Cranelift, and keeps them there. Without it they run on wazero, as
// upstream runs every module, and only modules that nri-wasm-compile put
// in the cache run compiled by Cranelift. Compiling at start makes a
// node's first start with a module slower than upstream's (a Go module
// takes some 10 s of CPU and a few hundred MiB), and every later one
// faster, with events about three times faster than on wazero.
func WithWasmCompiledAtStart() Option {
	return func(r *Adaptation) error {
		r.wasmCompiledAtStart = true
		return nil
	}
}

// WithAuditLogFile keeps the audit log (see WithAuditLog) in the file at
// path, one JSON record per line, appended to.
func WithAuditLogFile(path string) Option {
	return func(r *Adaptation) error {
		if path == "" {
			return fmt.Errorf("audit log file: empty path")
		}
		r.auditFile = path
		return nil
	}
}

// WithAuditEnvValues makes audit records carry the values of environment
// variables plugins set; by default they read "(redacted)".
func WithAuditEnvValues() Option {
	return func(r *Adaptation) error {
		r.auditEnvValues = true
		return nil
	}
}

// WithAuditRecordLimit bounds one audit record's JSON to bytes (at least
// 256; default 64 KiB): past it, the merged values are left out, then
// changes from the end of the list, and the record's "omitted" says what.
func WithAuditRecordLimit(bytes int) Option {
	return func(r *Adaptation) error {
		if bytes < 256 {
			return fmt.Errorf("audit record limit %d is below 256 bytes", bytes)
		}
		r.auditLimit = bytes
		return nil
	}
}

// PeerIdentity is what the kernel said of a plugin's process when it
// connected (or, for a pre-installed plugin, of the process launched):
// its user and group, its pid, and as read from /proc its executable and
// cgroup, with the Kubernetes pod UID and container ID in that cgroup's
// path. Empty strings and a zero PID are unknown.
type PeerIdentity struct {
	UID         uint32 `json:"uid"`
	GID         uint32 `json:"gid"`
	PID         int    `json:"pid"`
	Executable  string `json:"executable"`
	Cgroup      string `json:"cgroup"`
	PodUID      string `json:"podUid"`
	ContainerID string `json:"containerId"`
}

// PluginIdentity returns the identity of the active plugin name (its
// idx-name), and false if no such plugin is active or it has none (builtin
// and WASM plugins). A runtime's own checks, a builtin validator's say,
// may use it to tell who stands behind a name. Upstream has no such call.
func (r *Adaptation) PluginIdentity(name string) (*PeerIdentity, bool) {
	var (
		buf  C.nri_buffer
		cerr *C.nri_error
	)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if err := takeError(C.nri_adaptation_plugin_identity(r.core, cname, &buf, &cerr), cerr); err != nil {
		return nil, false
	}
	defer C.nri_buffer_free(&buf)
	if buf.len == 0 {
		return nil, false
	}
	id := &PeerIdentity{}
	if err := json.Unmarshal(C.GoBytes(unsafe.Pointer(buf.data), C.int(buf.len)), id); err != nil {
		return nil, false
	}
	return id, true
}
