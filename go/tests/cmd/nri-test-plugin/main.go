// Command nri-test-plugin is an NRI plugin built on upstream's Go stub
// (github.com/containerd/nri/pkg/stub, the version pinned in go.mod) whose
// behaviour comes from a JSON script: which events it subscribes to, what
// it replies, which requests fail, stall or crash it, and an unsolicited
// container update. Every request it receives is logged to a JSON-lines
// file before it replies. nri-rs's Rust integration tests use it to drive
// the Rust runtime core with a real upstream-stub plugin; README.md in this
// directory documents the script.
//
// External plugin:
//
//	nri-test-plugin -socket /run/nri.sock -name test -idx 10 -script s.json
//
// Pre-installed plugin: the runtime starts it with no arguments, the
// connection on fd 3 (NRI_PLUGIN_SOCKET) and its name and index in
// NRI_PLUGIN_NAME and NRI_PLUGIN_IDX. The script is then the Configure
// config if that is a JSON object, otherwise it is found through the
// sidecar file os.Args[0]+".json".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containerd/ttrpc"
	"github.com/sirupsen/logrus"
)

func main() {
	socket := flag.String("socket", api.DefaultSocketPath, "NRI socket to connect to (ignored when "+api.PluginSocketEnvVar+" is set)")
	name := flag.String("name", "", "plugin name (default: "+api.PluginNameEnvVar+", else from the executable's name)")
	idx := flag.String("idx", "", "plugin index, two digits (default: "+api.PluginIdxEnvVar+", else from the executable's name)")
	scriptPath := flag.String("script", "", "JSON script file (default: the Configure config, else the sidecar file <argv0>.json)")
	flag.Parse()

	logrus.SetOutput(os.Stderr)
	logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})

	if err := run(*socket, *name, *idx, *scriptPath); err != nil {
		logrus.Errorf("nri-test-plugin: %v", err)
		os.Exit(1)
	}
}

func run(socket, name, idx, scriptPath string) error {
	var flagScript *script
	if scriptPath != "" {
		s, err := loadScriptFile(scriptPath)
		if err != nil {
			return err
		}
		flagScript = s
	}

	name, idx, err := identity(name, idx)
	if err != nil {
		return err
	}
	p := newPlugin(idx+"-"+name, flagScript)

	opts := []stub.Option{
		stub.WithSocketPath(socket),
		stub.WithTTRPCOptions(nil, []ttrpc.ServerOpt{ttrpc.WithUnaryServerInterceptor(p.intercept)}),
		stub.WithOnClose(p.closedByStub),
	}
	// The stub takes name and index from the environment itself, logs a
	// name override and refuses to have the index set twice.
	if name != os.Getenv(api.PluginNameEnvVar) {
		opts = append(opts, stub.WithPluginName(name))
	}
	if os.Getenv(api.PluginIdxEnvVar) == "" {
		opts = append(opts, stub.WithPluginIdx(idx))
	}
	if fp := flagScript.failurePolicy(); fp != nil {
		opts = append(opts, stub.WithFailurePolicy(&api.FailurePolicy{
			FailRequest:   fp.FailRequest,
			KeepConnected: fp.KeepConnected,
		}))
	}

	p.stub, err = stub.New(p, opts...)
	if err != nil {
		return fmt.Errorf("create stub: %w", err)
	}

	err = p.stub.Run(context.Background())
	if err == nil || errors.Is(err, ttrpc.ErrServerClosed) || errors.Is(err, io.EOF) {
		// The connection went away. WithOnClose's callback may not have
		// run yet (Run can return first): exit as it would.
		p.connectionClosed()
	}
	return fmt.Errorf("plugin %s: %w", p.name, err)
}

// closedByStub is the stub's close callback. A refused registration
// closes the connection too, and Run then returns the runtime's reason,
// which main reports: the callback must not exit before it can. It still
// exits on its own after a while, since the stub's Start waits for
// Configure forever if the connection closes between the two.
func (p *plugin) closedByStub() {
	if !p.configured.Load() {
		time.Sleep(time.Second)
	}
	p.connectionClosed()
}

// connectionClosed ends the process once the runtime closed the
// connection: with status 1 after a failed Configure, else 0.
func (p *plugin) connectionClosed() {
	if p.configFailed.Load() {
		logrus.Errorf("%s: connection closed after a failed Configure", p.name)
		os.Exit(1)
	}
	logrus.Infof("%s: connection closed by the runtime, exiting", p.name)
	os.Exit(0)
}

// identity settles the plugin's name and index the way the stub does:
// flags, then NRI_PLUGIN_NAME/NRI_PLUGIN_IDX, then the executable's name
// (NN-name). Unlike the stub, an explicitly given name is kept when the
// index has to come from the executable's name.
func identity(name, idx string) (string, string, error) {
	envName, envIdx := os.Getenv(api.PluginNameEnvVar), os.Getenv(api.PluginIdxEnvVar)
	if envIdx != "" && idx != "" && idx != envIdx {
		return "", "", fmt.Errorf("-idx %q conflicts with %s=%q", idx, api.PluginIdxEnvVar, envIdx)
	}
	if name == "" {
		name = envName
	}
	if idx == "" {
		idx = envIdx
	}
	base := filepath.Base(os.Args[0])
	if idx == "" {
		i, n, err := api.ParsePluginName(base)
		if err != nil {
			return "", "", fmt.Errorf("no plugin index: give -idx or name the executable NN-name (%w)", err)
		}
		idx = i
		if name == "" {
			name = n
		}
	}
	if name == "" {
		name = base
	}
	if err := api.CheckPluginIndex(idx); err != nil {
		return "", "", err
	}
	return name, idx, nil
}
