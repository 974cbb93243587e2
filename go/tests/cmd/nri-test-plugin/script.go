package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Script is the JSON document that drives the plugin. Every field is
// optional; the zero Script subscribes to every event and does nothing.
type Script struct {
	// Events is the subscription: "all", or a comma-separated list of event
	// names as accepted by upstream's api.ParseEventMask (case-insensitive
	// pretty names, plus "pod"/"container"). Empty means "let the stub
	// derive it from the implemented handlers", which is every event.
	Events string `json:"events"`
	// Log is appended one JSON line per request received, before replying.
	Log string `json:"log"`
	// Configure overrides the raw event mask put on the wire.
	Configure *ConfigureScript `json:"configure"`
	// Replies holds protojson replies for CreateContainer,
	// UpdateContainer, StopContainer and Synchronize.
	Replies map[string]json.RawMessage `json:"replies"`
	// Fail makes the handler of an event return this error.
	Fail map[string]string `json:"fail"`
	// DelayMs makes the handler of an event sleep before replying.
	DelayMs map[string]int64 `json:"delay_ms"`
	// ExitOn makes the process exit with status 3 when the event arrives.
	ExitOn string `json:"exit_on"`
	// Spans logs each request once its handler returned, with the times
	// it arrived and was answered (started_ns, ended_ns: Unix time in
	// nanoseconds), so a test can tell which requests overlapped.
	Spans bool `json:"spans"`
	// Validate is the verdict of ValidateContainerAdjustment.
	Validate *ValidateScript `json:"validate"`
	// Unsolicited is an UpdateContainers request sent after Synchronize.
	Unsolicited *UnsolicitedScript `json:"unsolicited"`
	// FailurePolicy is declared through upstream's stub.WithFailurePolicy;
	// only from the -script flag, since the stub is made before Configure.
	FailurePolicy *FailurePolicyScript `json:"failure_policy"`
}

// FailurePolicyScript is the plugin's failure policy (NRI v0.12.4).
type FailurePolicyScript struct {
	FailRequest   bool `json:"fail_request"`
	KeepConnected bool `json:"keep_connected"`
}

// ConfigureScript overrides the Configure reply.
type ConfigureScript struct {
	// EventsMask, when present, replaces the event mask of the
	// ConfigureResponse on the wire, bypassing the stub's own checks, so 0
	// and invalid bits can be sent.
	EventsMask *int32 `json:"events_mask"`
}

// ValidateScript is the verdict for ValidateContainerAdjustment.
type ValidateScript struct {
	Reject bool   `json:"reject"`
	Reason string `json:"reason"`
}

// UnsolicitedScript describes one unsolicited UpdateContainers request.
type UnsolicitedScript struct {
	AfterMs   int64             `json:"after_ms"`
	Update    []json.RawMessage `json:"update"`
	ResultLog string            `json:"result_log"`
}

// script is a parsed and checked Script.
type script struct {
	Script
	source      string
	events      api.EventMask
	createReply *api.CreateContainerResponse
	updateReply *api.UpdateContainerResponse
	stopReply   *api.StopContainerResponse
	syncReply   *api.SynchronizeResponse
	unsolicited []*api.ContainerUpdate
}

// Names of the requests that are not lifecycle events.
const (
	evConfigure   = "Configure"
	evSynchronize = "Synchronize"
	evShutdown    = "Shutdown"
)

// knownEvent reports whether name is a request name the script may use.
func knownEvent(name string) bool {
	switch name {
	case evConfigure, evSynchronize, evShutdown:
		return true
	}
	for _, pretty := range api.EventPrettyNames {
		if name == pretty {
			return true
		}
	}
	return false
}

// parseScript decodes and checks a script. Unknown fields and unknown event
// names are errors, so a typo in a test's script fails loudly instead of
// silently doing nothing.
// failurePolicy is the script's failure policy; nil for a nil script.
func (s *script) failurePolicy() *FailurePolicyScript {
	if s == nil {
		return nil
	}
	return s.FailurePolicy
}

func parseScript(data []byte, source string) (*script, error) {
	s := &script{source: source}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.Script); err != nil {
		return nil, fmt.Errorf("script %s: %w", source, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("script %s: trailing data after the JSON object", source)
	}
	if err := s.compile(); err != nil {
		return nil, fmt.Errorf("script %s: %w", source, err)
	}
	return s, nil
}

func (s *script) compile() error {
	if ev := strings.ReplaceAll(s.Events, " ", ""); ev != "" {
		mask, err := api.ParseEventMask(ev)
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
		s.events = mask
	}

	for name := range s.Fail {
		if !knownEvent(name) {
			return fmt.Errorf("fail: unknown event %q", name)
		}
		if name == evShutdown {
			return errors.New("fail: Shutdown cannot fail (its stub handler returns no error)")
		}
	}
	for name, ms := range s.DelayMs {
		if !knownEvent(name) {
			return fmt.Errorf("delay_ms: unknown event %q", name)
		}
		if ms < 0 {
			return fmt.Errorf("delay_ms: negative delay %d for %s", ms, name)
		}
	}
	if s.ExitOn != "" && !knownEvent(s.ExitOn) {
		return fmt.Errorf("exit_on: unknown event %q", s.ExitOn)
	}

	for name, raw := range s.Replies {
		var msg proto.Message
		switch name {
		case "CreateContainer":
			s.createReply = &api.CreateContainerResponse{}
			msg = s.createReply
		case "UpdateContainer":
			s.updateReply = &api.UpdateContainerResponse{}
			msg = s.updateReply
		case "StopContainer":
			s.stopReply = &api.StopContainerResponse{}
			msg = s.stopReply
		case "Synchronize":
			s.syncReply = &api.SynchronizeResponse{}
			msg = s.syncReply
		default:
			return fmt.Errorf("replies: no scriptable reply for %q (only CreateContainer, UpdateContainer, StopContainer, Synchronize)", name)
		}
		if err := protojson.Unmarshal(raw, msg); err != nil {
			return fmt.Errorf("replies.%s: %w", name, err)
		}
	}
	if s.createReply != nil && len(s.createReply.Evict) != 0 {
		return errors.New("replies.CreateContainer: evict cannot be sent through the upstream stub's CreateContainer handler")
	}

	if u := s.Unsolicited; u != nil {
		if u.AfterMs < 0 {
			return fmt.Errorf("unsolicited.after_ms: negative delay %d", u.AfterMs)
		}
		for i, raw := range u.Update {
			upd := &api.ContainerUpdate{}
			if err := protojson.Unmarshal(raw, upd); err != nil {
				return fmt.Errorf("unsolicited.update[%d]: %w", i, err)
			}
			s.unsolicited = append(s.unsolicited, upd)
		}
	}
	return nil
}

// loadScriptFile reads and parses a script file.
func loadScriptFile(path string) (*script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	return parseScript(data, path)
}

// isJSONObject reports whether text looks like a JSON object (as opposed to
// some other plugin's configuration syntax).
func isJSONObject(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "{")
}

// sidecarPaths are the places of the sidecar file: next to the executable
// as invoked (os.Args[0], which is the plugin directory entry when a
// runtime launches the plugin), then next to the resolved executable.
func sidecarPaths() []string {
	paths := []string{os.Args[0] + ".json"}
	if exe, err := os.Executable(); err == nil && exe+".json" != paths[0] {
		paths = append(paths, exe+".json")
	}
	return paths
}

// loadSidecar finds the script through the sidecar file. The sidecar
// either holds the path of the script (relative paths are relative to the
// sidecar's directory) or, if it starts with '{', the script itself. With
// no sidecar the empty script is used.
func loadSidecar() (*script, error) {
	for _, sidecar := range sidecarPaths() {
		data, err := os.ReadFile(sidecar)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read sidecar: %w", err)
		}
		text := strings.TrimSpace(string(data))
		if isJSONObject(text) {
			return parseScript([]byte(text), sidecar)
		}
		if text == "" {
			return nil, fmt.Errorf("sidecar %s is empty", sidecar)
		}
		path := text
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(sidecar), path)
		}
		return loadScriptFile(path)
	}
	return parseScript([]byte("{}"), "(none)")
}

// resolveScript picks the script when Configure arrives: the -script flag
// wins, then the Configure config if it is a JSON object, then the sidecar.
func resolveScript(flagScript *script, config string) (*script, error) {
	if flagScript != nil {
		return flagScript, nil
	}
	if isJSONObject(config) {
		return parseScript([]byte(config), "(Configure config)")
	}
	return loadSidecar()
}
