// Package adaptation is a drop-in replacement for upstream NRI's
// github.com/containerd/nri/pkg/adaptation (v0.12.x), backed by the nri-rs
// Rust core through its C ABI (include/nri.h). It exports the same names
// with the same signatures, and uses upstream's pkg/api types, so a runtime
// switches by changing an import path (or with `go build -overlay`).
//
// Differences from upstream are listed in docs/COMPATIBILITY.md; the ones
// a caller can notice: WithTTRPCOptions is accepted and ignored (the core
// speaks ttrpc itself), events are refused before Start and after Stop,
// and the embedded sync.Mutex is not taken by the adaptation itself (the
// core serializes events on its own).
package adaptation

/*
#include <stdint.h>
#include <stdlib.h>
#include "nri.h"

#include "shims.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/cgo"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/log"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

const (
	// DefaultPluginPath is the directory whose plugin executables are launched
	// at Start unless WithPluginPath names another.
	DefaultPluginPath = "/opt/nri/plugins"
	// DefaultSocketPath is where plugins started outside the runtime connect,
	// unless WithSocketPath names another socket.
	DefaultSocketPath = api.DefaultSocketPath
	// DefaultPluginConfigPath holds the configuration files of the plugins the
	// runtime launches itself (see WithPluginConfigPath).
	DefaultPluginConfigPath = "/etc/nri/conf.d"
	// DefaultPluginRegistrationTimeout bounds how long a connecting plugin may
	// take to register, until SetPluginRegistrationTimeout changes it.
	DefaultPluginRegistrationTimeout = api.DefaultPluginRegistrationTimeout
	// DefaultPluginRequestTimeout bounds how long a plugin may take to answer one
	// event, until SetPluginRequestTimeout changes it.
	DefaultPluginRequestTimeout = api.DefaultPluginRequestTimeout
)

// SyncFn is supplied by the runtime and called when a plugin connects: it
// passes the runtime's current pods and containers to the SyncCB it is given.
type SyncFn func(context.Context, SyncCB) error

// SyncCB hands the runtime's pods and containers to the connecting plugin and
// returns the container updates that plugin asks for, for the runtime to apply.
type SyncCB func(context.Context, []*PodSandbox, []*Container) ([]*ContainerUpdate, error)

// UpdateFn is supplied by the runtime to apply container updates a plugin
// requests on its own, outside any event; it returns the updates that failed.
type UpdateFn func(context.Context, []*ContainerUpdate) ([]*ContainerUpdate, error)

var (
	// The context given to log calls that have no request context.
	noCtx = context.TODO()

	// ErrWasmDisabled is upstream's error for a build without WASM support:
	// in nri-rs, this package built with upstream's nri_no_wasm tag (it
	// otherwise lends the core wazero, whatever the library was built
	// with). New logs it, as upstream's does, and WASM plugins are refused
	// with "no WASM support".
	ErrWasmDisabled = errors.New("WASM support is disabled (at build time)")
)

// Adaptation is a runtime's handle on NRI: it runs the plugins and relays the
// runtime's pod and container events to them through the Rust core.
// It embeds sync.Mutex like upstream's, for API compatibility; the core
// serializes events itself and never takes it.
type Adaptation struct {
	sync.Mutex
	name        string
	version     string
	nriVersion  string
	dropinPath  string
	pluginPath  string
	socketPath  string
	dontListen  bool
	syncFn      SyncFn
	updateFn    UpdateFn
	clientOpts  []ttrpc.ClientOpts
	serverOpts  []ttrpc.ServerOpt
	builtin     []*builtin.BuiltinPlugin
	validator   *validator.DefaultValidatorConfig
	metrics     Metrics
	deprecation DeprecationRecorder
	// Timeouts of this adaptation, if set by its options (0: process-wide).
	registrationTimeout time.Duration
	requestTimeout      time.Duration
	// The budget of each whole event (WithEventTimeout; 0: none).
	eventTimeout time.Duration
	// Whether Stop sends plugins Shutdown first (WithShutdownOnStop).
	shutdownOnStop bool
	// Whether required plugins guard pods (WithRequiredPluginsGuardingPods).
	guardPods bool
	// Whether joining plugins are activated within the sync
	// (WithPluginsActivatedWithinSync).
	activateWithinSync bool
	// Whether a plugin replaces a connected one of its name (WithPluginHandover).
	pluginHandover bool
	// Events of different pods at once (WithPodConcurrency), and the
	// plugins sent requests of different pods at once.
	podConcurrency    bool
	concurrentPlugins []string
	// Request timeouts of single plugins (WithPluginRequestTimeout).
	pluginTimeouts map[string]time.Duration
	// The sync timeout of all plugins and of single ones
	// (WithPluginSyncTimeout, WithPluginSyncTimeoutFor; 0, absent: the
	// core's default).
	syncTimeout        time.Duration
	pluginSyncTimeouts map[string]time.Duration
	// Who may register which plugin names (WithPluginIdentities; nil: anyone).
	identities []PluginIdentityRule
	// Where audit records go (WithAuditLog, WithAuditLogFile).
	audit          AuditFunc
	auditFile      string
	auditEnvValues bool
	auditLimit     int
	// What the default validator lets each plugin change
	// (WithDefaultValidatorPluginPermissions; nil: everything).
	permissions []PluginPermissions
	// Where WASM plugins' compiled modules are kept (WithWasmCacheDir;
	// nil: the library's default).
	wasmCacheDir *string
	// Compile at start the WASM modules the cache does not hold, instead of
	// running them on wazero (WithWasmCompiledAtStart).
	wasmCompiledAtStart bool

	core *C.nri_adaptation
	// Events in the core now. Kept apart from r, so that counting one down
	// after the call does not keep r alive: built with nri_debug_gc, r's
	// finalizer finds a call in progress when a runtime.KeepAlive(r) is
	// missing, and says so.
	inCore *eventCount
}

// Option changes one setting of an Adaptation being made by New.
type Option func(*Adaptation) error

// WithPluginPath makes Start launch the plugins found in path instead of
// DefaultPluginPath.
func WithPluginPath(path string) Option {
	return func(r *Adaptation) error {
		r.pluginPath = path
		return nil
	}
}

// WithPluginConfigPath makes launched plugins take their configuration from
// path instead of DefaultPluginConfigPath.
func WithPluginConfigPath(path string) Option {
	return func(r *Adaptation) error {
		r.dropinPath = path
		return nil
	}
}

// WithSocketPath makes the adaptation listen for external plugins on path
// instead of DefaultSocketPath.
func WithSocketPath(path string) Option {
	return func(r *Adaptation) error {
		r.socketPath = path
		return nil
	}
}

// WithDisabledExternalConnections stops the adaptation from listening on its
// socket, so only the plugins it launches or has built in take part.
func WithDisabledExternalConnections() Option {
	return func(r *Adaptation) error {
		r.dontListen = true
		return nil
	}
}

// WithTTRPCOptions takes ttrpc client and server options, for callers of
// upstream's API.
// nri-rs speaks ttrpc in its Rust core, so these Go options are recorded
// and otherwise ignored.
func WithTTRPCOptions(clientOpts []ttrpc.ClientOpts, serverOpts []ttrpc.ServerOpt) Option {
	return func(r *Adaptation) error {
		r.clientOpts = append(r.clientOpts, clientOpts...)
		r.serverOpts = append(r.serverOpts, serverOpts...)
		return nil
	}
}

// WithBuiltinPlugins adds in-process plugins, run alongside the external
// ones; they may be given more than once and accumulate.
func WithBuiltinPlugins(plugins ...*builtin.BuiltinPlugin) Option {
	return func(r *Adaptation) error {
		r.builtin = append(r.builtin, plugins...)
		return nil
	}
}

// WithMetrics sets a metrics sink for plugin invocations, latency,
// adjustments and the plugin count.
func WithMetrics(m Metrics) Option {
	return func(r *Adaptation) error {
		r.metrics = m
		return nil
	}
}

// WithDefaultValidator turns on the builtin default validator when cfg is
// non-nil and enabled; otherwise it logs that the validator is off.
// The validation itself runs in the Rust core.
func WithDefaultValidator(cfg *validator.DefaultValidatorConfig) Option {
	return func(r *Adaptation) error {
		if cfg == nil || !cfg.Enable {
			log.Infof(noCtx, "built-in NRI default validator is disabled")
			return nil
		}
		r.validator = cfg
		return nil
	}
}

// WithDeprecationRecorder sets a recorder for plugins' use of deprecated features.
func WithDeprecationRecorder(d DeprecationRecorder) Option {
	return func(r *Adaptation) error {
		r.deprecation = d
		return nil
	}
}

var setupLogging sync.Once

// New makes an Adaptation for the runtime called name at version, with its
// synchronization and update functions (both required) and opts applied.
func New(name, version string, syncFn SyncFn, updateFn UpdateFn, opts ...Option) (*Adaptation, error) {
	if syncFn == nil {
		return nil, fmt.Errorf("failed to create NRI adaptation, nil SyncFn")
	}
	if updateFn == nil {
		return nil, fmt.Errorf("failed to create NRI adaptation, nil UpdateFn")
	}

	setupLogging.Do(func() {
		var cerr *C.nri_error
		if err := takeError(C.nri_go_set_log(C.NRI_LOG_LEVEL_DEBUG, &cerr), cerr); err != nil {
			log.Warnf(noCtx, "nri-rs logs are not forwarded: %v", err)
		}
	})

	r := &Adaptation{
		inCore:     new(eventCount),
		name:       name,
		version:    version,
		nriVersion: runtimeNRIVersion(),
		syncFn:     syncFn,
		updateFn:   updateFn,
		pluginPath: DefaultPluginPath,
		dropinPath: DefaultPluginConfigPath,
		socketPath: DefaultSocketPath,
	}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, fmt.Errorf("failed to apply option: %w", err)
		}
	}
	podConcurrencyFromEnv(r)
	if !wasmBuiltIn {
		log.Errorf(noCtx, "failed to initialize WASM support: %v", ErrWasmDisabled)
	} else if r.wasmCompiledAtStart && !CompilesWasm() {
		log.Warnf(noCtx, "nri-rs: WithWasmCompiledAtStart ignored: the library was built without its compiled-wasm feature, WASM plugins run on wazero")
	}
	if len(r.clientOpts) > 0 || len(r.serverOpts) > 0 {
		log.Infof(noCtx, "nri-rs: ttrpc options are not supported by the Rust core, ignored")
	}

	if err := r.createCore(); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(r, func(r *Adaptation) {
		if debugGC && r.inCore.busy() {
			panic("nri-rs: an Adaptation was finalized while the core ran an event for it: a runtime.KeepAlive is missing")
		}
		C.nri_adaptation_free(r.core)
	})

	log.Infof(noCtx, "runtime interface created (nri-rs %s, NRI %s)", Version(), C.GoString(C.nri_api_version()))
	return r, nil
}

// podConcurrencyEnv names the environment variable that turns per-pod
// concurrency on for a runtime that does not pass WithPodConcurrency itself
// (containerd and CRI-O do not): set, even empty, it is read at New as
// WithPodConcurrency of the comma-separated plugin names it holds (idx-name
// or name). It lets a node, or an e2e run, try the option on an unmodified
// runtime build; unset, nothing changes.
const podConcurrencyEnv = "NRI_RS_POD_CONCURRENCY"

func podConcurrencyFromEnv(r *Adaptation) {
	v, ok := os.LookupEnv(podConcurrencyEnv)
	if !ok {
		return
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	r.podConcurrency = true
	r.concurrentPlugins = append(r.concurrentPlugins, names...)
	log.Infof(noCtx, "nri-rs: per-pod concurrency on (%s), for plugins %q", podConcurrencyEnv, names)
}

// Version is the version of the nri-rs core behind this package.
func Version() string {
	return C.GoString(C.nri_version())
}

// CompilesWasm says whether the library behind this package compiles WASM
// plugins itself (built with its compiled-wasm cargo feature; the default
// build is not). Without it, every WASM plugin runs on wazero, as under
// upstream, and WithWasmCacheDir and WithWasmCompiledAtStart change nothing.
func CompilesWasm() bool {
	return bool(C.nri_wasm_supported())
}

// createCore builds the core's options from r and creates the core.
func (r *Adaptation) createCore() error {
	opts := C.nri_options_new()
	consumed := false
	defer func() {
		if !consumed {
			C.nri_options_free(opts)
		}
	}()

	var cerr *C.nri_error
	check := func(st C.nri_status) error { return takeError(st, cerr) }
	withString := func(s string, set func(*C.char) C.nri_status) error {
		cs := C.CString(s)
		defer C.free(unsafe.Pointer(cs))
		return check(set(cs))
	}
	// Sets each plugin's timeout in m, in the order of their names.
	perPlugin := func(m map[string]time.Duration, set func(*C.char, C.uint64_t) C.nri_status) error {
		names := make([]string, 0, len(m))
		for name := range m {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			millis := C.uint64_t(m[name].Milliseconds())
			if err := withString(name, func(s *C.char) C.nri_status { return set(s, millis) }); err != nil {
				return err
			}
		}
		return nil
	}

	steps := []func() error{
		func() error {
			return withString(r.pluginPath, func(s *C.char) C.nri_status { return C.nri_options_set_plugin_path(opts, s, &cerr) })
		},
		func() error {
			return withString(r.dropinPath, func(s *C.char) C.nri_status { return C.nri_options_set_plugin_config_path(opts, s, &cerr) })
		},
		func() error {
			return withString(r.socketPath, func(s *C.char) C.nri_status { return C.nri_options_set_socket_path(opts, s, &cerr) })
		},
		func() error {
			return withString(r.nriVersion, func(s *C.char) C.nri_status { return C.nri_options_set_nri_version(opts, s, &cerr) })
		},
		func() error {
			if !r.dontListen {
				return nil
			}
			return check(C.nri_options_disable_external_connections(opts, &cerr))
		},
		func() error {
			if err := check(C.nri_options_set_registration_timeout(opts, C.uint64_t(r.registrationTimeout.Milliseconds()), &cerr)); err != nil {
				return err
			}
			if err := check(C.nri_options_set_request_timeout(opts, C.uint64_t(r.requestTimeout.Milliseconds()), &cerr)); err != nil {
				return err
			}
			if err := check(C.nri_options_set_event_timeout(opts, C.uint64_t(r.eventTimeout.Milliseconds()), &cerr)); err != nil {
				return err
			}
			if r.syncTimeout == 0 {
				return nil
			}
			return check(C.nri_options_set_sync_timeout(opts, C.uint64_t(r.syncTimeout.Milliseconds()), &cerr))
		},
		// The on/off options of nri-rs's own (extensions.go); off is the
		// core's default, so each is set as it is.
		func() error { return check(C.nri_options_set_shutdown_on_stop(opts, C.bool(r.shutdownOnStop), &cerr)) },
		func() error {
			return check(C.nri_options_set_required_plugins_guard_pods(opts, C.bool(r.guardPods), &cerr))
		},
		func() error {
			return check(C.nri_options_set_activate_within_sync(opts, C.bool(r.activateWithinSync), &cerr))
		},
		func() error { return check(C.nri_options_set_plugin_handover(opts, C.bool(r.pluginHandover), &cerr)) },
		func() error {
			if err := check(C.nri_options_set_pod_concurrency(opts, C.bool(r.podConcurrency), &cerr)); err != nil {
				return err
			}
			for _, name := range r.concurrentPlugins {
				if err := withString(name, func(s *C.char) C.nri_status {
					return C.nri_options_add_concurrent_plugin(opts, s, &cerr)
				}); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			return perPlugin(r.pluginTimeouts, func(name *C.char, millis C.uint64_t) C.nri_status {
				return C.nri_options_set_plugin_request_timeout(opts, name, millis, &cerr)
			})
		},
		func() error {
			return perPlugin(r.pluginSyncTimeouts, func(name *C.char, millis C.uint64_t) C.nri_status {
				return C.nri_options_set_plugin_sync_timeout(opts, name, millis, &cerr)
			})
		},
		func() error {
			return check(r.setWasmEngine(opts, &cerr))
		},
		func() error {
			if r.wasmCacheDir == nil {
				return nil
			}
			return withString(*r.wasmCacheDir, func(s *C.char) C.nri_status {
				return C.nri_options_set_wasm_cache_dir(opts, s, &cerr)
			})
		},
		func() error {
			if r.audit != nil {
				if err := check(C.nri_go_set_audit(opts, C.uintptr_t(cgo.NewHandle(r.audit)), &cerr)); err != nil {
					return err
				}
			}
			if r.auditFile != "" {
				err := withString(r.auditFile, func(s *C.char) C.nri_status { return C.nri_options_set_audit_file(opts, s, &cerr) })
				if err != nil {
					return err
				}
			}
			if r.auditLimit > 0 {
				if err := check(C.nri_options_set_audit_record_limit(opts, C.size_t(r.auditLimit), &cerr)); err != nil {
					return err
				}
			}
			return check(C.nri_options_set_audit_env_values(opts, C.bool(r.auditEnvValues), &cerr))
		},
		func() error {
			if r.identities == nil {
				return nil
			}
			policy, err := identityPolicyJSON(r.identities)
			if err != nil {
				return err
			}
			return withString(policy, func(s *C.char) C.nri_status { return C.nri_options_set_plugin_identities(opts, s, &cerr) })
		},
		func() error {
			if r.validator == nil {
				return nil
			}
			cfg, err := validatorConfigJSON(r.validator, r.permissions)
			if err != nil {
				return err
			}
			return withString(cfg, func(s *C.char) C.nri_status { return C.nri_options_set_default_validator(opts, s, &cerr) })
		},
		func() error {
			for _, b := range r.builtin {
				if b == nil {
					return fmt.Errorf("failed to create NRI adaptation, nil builtin plugin")
				}
				name, index := C.CString(b.Base), C.CString(b.Index)
				st := C.nri_go_add_builtin(opts, name, index, C.uintptr_t(cgo.NewHandle(b)), &cerr)
				C.free(unsafe.Pointer(name))
				C.free(unsafe.Pointer(index))
				if err := check(st); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			if r.metrics == nil {
				return nil
			}
			return check(C.nri_go_set_metrics(opts, C.uintptr_t(cgo.NewHandle(r.metrics)), &cerr))
		},
		func() error {
			if r.deprecation == nil {
				return nil
			}
			return check(C.nri_go_set_deprecation(opts, C.uintptr_t(cgo.NewHandle(r.deprecation)), &cerr))
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}

	name, version := C.CString(r.name), C.CString(r.version)
	defer C.free(unsafe.Pointer(name))
	defer C.free(unsafe.Pointer(version))
	cbs := C.nri_go_callbacks(C.uintptr_t(cgo.NewHandle(&runtimeCallbacks{syncFn: r.syncFn, updateFn: r.updateFn})))
	consumed = true
	return check(C.nri_adaptation_new(name, version, &cbs, opts, &r.core, &cerr))
}

// validatorConfigJSON encodes the default validator configuration with
// upstream's YAML keys, which the core reads. The keys come from the
// struct's own tags, so the fields are those of the release the runtime
// builds with (v0.10.x has no rejectSysctlAdjustment).
func validatorConfigJSON(cfg *validator.DefaultValidatorConfig, perms []PluginPermissions) (string, error) {
	fields := map[string]any{}
	v := reflect.ValueOf(cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if key == "" || key == "-" || !v.Type().Field(i).IsExported() {
			continue
		}
		fields[key] = v.Field(i).Interface()
	}
	if perms != nil {
		fields["pluginPermissions"] = permissionsJSON(perms)
	}
	b, err := json.Marshal(fields)
	return string(b), err
}

// Start runs the builtin plugins and those in the plugin path, then listens
// for external plugins unless WithDisabledExternalConnections was given.
func (r *Adaptation) Start() error {
	// The core logs "runtime interface starting up...", as upstream does.
	var cerr *C.nri_error
	raceIOSync()
	err := takeError(C.nri_adaptation_start(r.core, &cerr), cerr)
	raceIOSync()
	runtime.KeepAlive(r)
	return err
}

// Stop waits for an event under way to finish, stops listening and
// disconnects every plugin.
func (r *Adaptation) Stop() {
	// The core logs "runtime interface shutting down...", as upstream does.
	var cerr *C.nri_error
	raceIOSync()
	defer raceIOSync()
	if err := takeError(C.nri_adaptation_stop(r.core, &cerr), cerr); err != nil {
		log.Errorf(noCtx, "failed to stop NRI runtime: %v", err)
	}
	runtime.KeepAlive(r)
}

// hasPlugin tells whether a plugin of this full name (idx-name) is active:
// registered, with its connection open. Like skips, it never waits for an
// event in progress.
func (r *Adaptation) hasPlugin(name string) bool {
	if r.core == nil {
		return false
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return bool(C.nri_adaptation_has_plugin(r.core, cname))
}

// coreThreads is how many threads the core's runtimes have running in this
// process (nri_core_threads), for leak checks in tests.
func coreThreads() int {
	return int(C.nri_core_threads())
}

// event relays req through the core, unless no plugin wants event ev.
func (r *Adaptation) event(ctx context.Context, ev api.Event, req proto.Message) error {
	if r.skips(ev) {
		return nil
	}
	bp, err := encodeEvent(ev, req)
	defer releaseBuffer(bp)
	if err != nil {
		return err
	}
	return r.relay(ctx, ev, *bp, nil)
}

// eventWithResponse relays req through the core and decodes its response
// into rsp; if no plugin wants event ev, rsp is the core's answer to an
// event no plugin saw.
func (r *Adaptation) eventWithResponse(ctx context.Context, ev api.Event, req, rsp proto.Message) error {
	if r.skips(ev) {
		answerSkipped(rsp)
		return nil
	}
	return r.relayMessage(ctx, ev, req, rsp)
}

// relayMessage relays req through the core, whoever wants it, and decodes
// the response into rsp.
func (r *Adaptation) relayMessage(ctx context.Context, ev api.Event, req, rsp proto.Message) error {
	bp, err := marshal(req)
	defer releaseBuffer(bp)
	if err != nil {
		return err
	}
	return r.relayBytes(ctx, ev, *bp, rsp)
}

// relayBytes hands encoded request bytes to the core and decodes the
// response into rsp.
func (r *Adaptation) relayBytes(ctx context.Context, ev api.Event, data []byte, rsp proto.Message) error {
	var buf C.nri_buffer
	if err := r.relay(ctx, ev, data, &buf); err != nil {
		return err
	}
	return takeMessage(&buf, rsp)
}

// relay hands an encoded request to the core's one entry point for
// events; rsp is nil for events without a response. A context that can
// end gives the event up when it ends first, as upstream does with the
// runtime's context: the error is then ctx's own, and no plugin is
// blamed. A context that cannot end (context.Background) takes the same
// path without a cancellation.
//
// The trigger is registered with context.AfterFunc rather than run by a
// goroutine started for each event. Such a goroutine is runnable on the
// caller's P just as its thread blocks in the core, so Go's scheduler has
// to run it on another thread, woken for every event: up to a third more
// CPU per one-plugin event (PERFORMANCE.md). AfterFunc starts nothing for
// the standard library's contexts, what a CRI request's context is, until
// ctx ends.
func (r *Adaptation) relay(ctx context.Context, ev api.Event, data []byte, rsp *C.nri_buffer) error {
	if ctx.Done() == nil {
		return r.callEvent(ev, nil, data, rsp)
	}
	var (
		cancel *C.nri_cancel
		cerr   *C.nri_error
	)
	if err := takeError(C.nri_cancel_new(&cancel, &cerr), cerr); err != nil {
		return err
	}
	triggered := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(triggered)
		reason := C.nri_cancel_reason(C.NRI_CANCEL_REASON_CANCELED)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = C.NRI_CANCEL_REASON_DEADLINE_EXCEEDED
		}
		C.nri_cancel_trigger(cancel, reason)
	})
	err := r.callEvent(ev, cancel, data, rsp)
	if !stop() {
		<-triggered // nri_cancel_free must not race with the trigger
	}
	C.nri_cancel_free(cancel)
	var e *nriError
	if errors.As(err, &e) && e.status == C.NRI_STATUS_CANCELED && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// eventCount counts an adaptation's events in the core. A nil count (a
// zero Adaptation's) counts nothing.
type eventCount struct{ n atomic.Int32 }

func (c *eventCount) enter() {
	if c != nil {
		c.n.Add(1)
	}
}

func (c *eventCount) leave() {
	if c != nil {
		c.n.Add(-1)
	}
}

func (c *eventCount) busy() bool { return c != nil && c.n.Load() > 0 }

// callEvent is the one call of nri_adaptation_event; cancel is nil for an
// event that cannot be given up.
func (r *Adaptation) callEvent(ev api.Event, cancel *C.nri_cancel, data []byte, rsp *C.nri_buffer) error {
	p, n := bytesArg(data)
	var cerr *C.nri_error
	inCore := r.inCore
	inCore.enter()
	raceIOSync()
	err := takeError(C.nri_adaptation_event(r.core, C.int32_t(ev), cancel, p, n, rsp, &cerr), cerr)
	raceIOSync()
	inCore.leave()
	runtime.KeepAlive(data)
	runtime.KeepAlive(r)
	return err
}

// RunPodSandbox tells the subscribed plugins that a pod sandbox is being started.
func (r *Adaptation) RunPodSandbox(ctx context.Context, req *RunPodSandboxRequest) error {
	return r.event(ctx, api.Event_RUN_POD_SANDBOX, req)
}

// UpdatePodSandbox tells the subscribed plugins about a pod sandbox's new
// resources; the response it returns has no fields.
func (r *Adaptation) UpdatePodSandbox(ctx context.Context, req *UpdatePodSandboxRequest) (*UpdatePodSandboxResponse, error) {
	rsp := &UpdatePodSandboxResponse{}
	err := r.eventWithResponse(ctx, api.Event_UPDATE_POD_SANDBOX, req, rsp)
	if err != nil {
		return nil, err
	}
	return rsp, nil
}

// PostUpdatePodSandbox tells the subscribed plugins that a pod sandbox was updated.
func (r *Adaptation) PostUpdatePodSandbox(ctx context.Context, req *PostUpdatePodSandboxRequest) error {
	return r.event(ctx, api.Event_POST_UPDATE_POD_SANDBOX, req)
}

// StopPodSandbox tells the subscribed plugins that a pod sandbox is stopping.
func (r *Adaptation) StopPodSandbox(ctx context.Context, req *StopPodSandboxRequest) error {
	return r.event(ctx, api.Event_STOP_POD_SANDBOX, req)
}

// RemovePodSandbox tells the subscribed plugins that a pod sandbox is being removed.
func (r *Adaptation) RemovePodSandbox(ctx context.Context, req *RemovePodSandboxRequest) error {
	return r.event(ctx, api.Event_REMOVE_POD_SANDBOX, req)
}

// CreateContainer asks the subscribed plugins for their changes to a container
// being created and returns their merged adjustment and updates of other
// containers, once any validators have accepted them.
func (r *Adaptation) CreateContainer(ctx context.Context, req *CreateContainerRequest) (*CreateContainerResponse, error) {
	defer fillContainer(req.GetContainer())()
	rsp := &CreateContainerResponse{}
	err := r.eventWithResponse(ctx, api.Event_CREATE_CONTAINER, req, rsp)
	if err != nil {
		return nil, err
	}
	return rsp, nil
}

// fillContainer gives the container of a CreateContainer request, for the
// length of the event, the empty parts upstream gives it before the first
// plugin (collectCreateContainerResult) that are not nil-or-empty alike
// once encoded: hooks, linux, its resources, their memory and CPU. Encoded
// so, the request is what the core sends plugins, and it forwards these
// bytes instead of encoding its copy again (create_container_encoded).
// The returned function takes the parts away again: the caller's request
// stays as it was (see TestCreateContainerLeavesTheCallersRequestAlone).
func fillContainer(c *api.Container) (restore func()) {
	if c == nil {
		return func() {}
	}
	hooks, linux := c.Hooks == nil, c.Linux == nil
	if hooks {
		c.Hooks = &api.Hooks{}
	}
	if linux {
		c.Linux = &api.LinuxContainer{}
	}
	l := c.Linux
	resources := l.Resources == nil
	if resources {
		l.Resources = &api.LinuxResources{}
	}
	memory, cpu := l.Resources.Memory == nil, l.Resources.Cpu == nil
	if memory {
		l.Resources.Memory = &api.LinuxMemory{}
	}
	if cpu {
		l.Resources.Cpu = &api.LinuxCPU{}
	}
	return func() {
		if memory {
			l.Resources.Memory = nil
		}
		if cpu {
			l.Resources.Cpu = nil
		}
		if resources {
			l.Resources = nil
		}
		if linux {
			c.Linux = nil
		}
		if hooks {
			c.Hooks = nil
		}
	}
}

// PostCreateContainer tells the subscribed plugins that a container was created.
func (r *Adaptation) PostCreateContainer(ctx context.Context, req *PostCreateContainerRequest) error {
	return r.event(ctx, api.Event_POST_CREATE_CONTAINER, req)
}

// StartContainer tells the subscribed plugins that a container is starting.
func (r *Adaptation) StartContainer(ctx context.Context, req *StartContainerRequest) error {
	return r.event(ctx, api.Event_START_CONTAINER, req)
}

// PostStartContainer tells the subscribed plugins that a container has started.
func (r *Adaptation) PostStartContainer(ctx context.Context, req *PostStartContainerRequest) error {
	return r.event(ctx, api.Event_POST_START_CONTAINER, req)
}

// UpdateContainer passes a container's resource update to the subscribed
// plugins and returns the updates they ask for.
func (r *Adaptation) UpdateContainer(ctx context.Context, req *UpdateContainerRequest) (*UpdateContainerResponse, error) {
	rsp := &UpdateContainerResponse{}
	err := r.eventWithResponse(ctx, api.Event_UPDATE_CONTAINER, req, rsp)
	if err != nil {
		return nil, err
	}
	return rsp, nil
}

// PostUpdateContainer tells the subscribed plugins that a container was updated.
func (r *Adaptation) PostUpdateContainer(ctx context.Context, req *PostUpdateContainerRequest) error {
	return r.event(ctx, api.Event_POST_UPDATE_CONTAINER, req)
}

// StopContainer tells the subscribed plugins that a container is stopping and
// returns the updates of other containers they ask for.
func (r *Adaptation) StopContainer(ctx context.Context, req *StopContainerRequest) (*StopContainerResponse, error) {
	rsp := &StopContainerResponse{}
	err := r.eventWithResponse(ctx, api.Event_STOP_CONTAINER, req, rsp)
	if err != nil {
		return nil, err
	}
	return rsp, nil
}

// RemoveContainer tells the subscribed plugins that a container is being removed.
func (r *Adaptation) RemoveContainer(ctx context.Context, req *RemoveContainerRequest) error {
	return r.event(ctx, api.Event_REMOVE_CONTAINER, req)
}

// PluginSyncBlock holds plugin synchronization off until it is unblocked.
type PluginSyncBlock struct {
	r     *Adaptation
	block *C.nri_plugin_sync_block
}

// BlockPluginSync waits for any synchronization under way to end, then keeps
// newly connecting plugins from synchronizing until Unblock; events go on.
func (r *Adaptation) BlockPluginSync() *PluginSyncBlock {
	var (
		block *C.nri_plugin_sync_block
		cerr  *C.nri_error
	)
	if err := takeError(C.nri_adaptation_block_plugin_sync(r.core, &block, &cerr), cerr); err != nil {
		log.Errorf(noCtx, "failed to block plugin sync: %v", err)
		return &PluginSyncBlock{}
	}
	return &PluginSyncBlock{r: r, block: block}
}

// Unblock lifts the block, letting waiting plugins synchronize. Calls after
// the first do nothing; b must not be unblocked from two goroutines at once.
func (b *PluginSyncBlock) Unblock() {
	if b != nil && b.block != nil {
		C.nri_plugin_sync_block_free(b.block)
		b.block = nil
		runtime.KeepAlive(b.r)
		b.r = nil
	}
}

// SetPluginRegistrationTimeout changes, process-wide, how long a plugin may
// take to register.
func SetPluginRegistrationTimeout(t time.Duration) {
	C.nri_set_plugin_registration_timeout(C.uint64_t(t.Milliseconds()))
}

// SetPluginRequestTimeout changes, process-wide, how long a plugin may take to
// answer an event.
func SetPluginRequestTimeout(t time.Duration) {
	C.nri_set_plugin_request_timeout(C.uint64_t(t.Milliseconds()))
}
