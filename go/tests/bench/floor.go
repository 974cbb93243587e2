package main

// The physical floors, measured in the same run as the cases: a raw
// request/response over a Unix socket pair (C on both ends, blocking
// syscalls: no runtime, no scheduler), a bare Go ttrpc round trip, and the
// same through upstream's NRI multiplexer. The peer is this program
// re-executed in a child mode (NRI_BENCH_CHILD), the connection on fd 3.

/*
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int xfer(int fd, char *buf, size_t n, int rd) {
	size_t done = 0;
	while (done < n) {
		ssize_t r = rd ? read(fd, buf + done, n - done) : write(fd, buf + done, n - done);
		if (r < 0 && errno == EINTR) continue;
		if (r <= 0) return -1;
		done += (size_t)r;
	}
	return 0;
}

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Client: iters round trips of req bytes out, rsp bytes back; each one's
// duration in ns goes to out. Returns 0, or -1 on a transport error.
static int raw_client(int fd, size_t req, size_t rsp, int iters, int64_t *out) {
	char *buf = calloc(1, req > rsp ? req : rsp);
	if (!buf) return -1;
	for (int i = 0; i < iters; i++) {
		int64_t t0 = now_ns();
		if (xfer(fd, buf, req, 0) || xfer(fd, buf, rsp, 1)) { free(buf); return -1; }
		out[i] = now_ns() - t0;
	}
	free(buf);
	return 0;
}

// Server: answer every req bytes with rsp bytes until the peer closes.
static void raw_server(int fd, size_t req, size_t rsp) {
	char *buf = calloc(1, req > rsp ? req : rsp);
	if (!buf) return;
	while (xfer(fd, buf, req, 1) == 0 && xfer(fd, buf, rsp, 0) == 0) {}
	free(buf);
}
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

const (
	childEnv    = "NRI_BENCH_CHILD"
	childReqEnv = "NRI_BENCH_REQ_BYTES"
	childRspEnv = "NRI_BENCH_RSP_BYTES"
	echoService = "nri.bench.Echo"
	echoMethod  = "Echo"
	childRaw    = "raw"
	childTTRPC  = "ttrpc"
	childMuxed  = "ttrpc-mux"
)

// floorWarmups round trips precede each floor's measured ones.
var floorWarmups = 200

// runChild runs a child mode if this process is one; it never returns then.
func runChild() {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	f := os.NewFile(3, "peer")
	switch mode {
	case childRaw:
		req, _ := strconv.Atoi(os.Getenv(childReqEnv))
		rsp, _ := strconv.Atoi(os.Getenv(childRspEnv))
		C.raw_server(C.int(f.Fd()), C.size_t(req), C.size_t(rsp))
	case childTTRPC, childMuxed:
		conn, err := net.FileConn(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		serveEcho(conn, mode == childMuxed)
	default:
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(0)
}

// echoResponse is what the ttrpc floors' server returns: the response the
// CreateContainer case gets from 4 typical plugins, in size.
func echoResponse() *api.CreateContainerResponse {
	a := &api.ContainerAdjustment{}
	for k := 0; k < 4; k++ {
		a.AddEnv(fmt.Sprintf("BENCH_PLUGIN_%d", k), fmt.Sprintf("plugin-%d", k))
		a.AddAnnotation(fmt.Sprintf("bench.nri.io/plugin-%d", k), "adjusted")
		a.AddMount(&api.Mount{Destination: fmt.Sprintf("/bench/%d", k), Type: "bind",
			Source: fmt.Sprintf("/var/lib/bench/%d", k), Options: []string{"rbind", "ro"}})
	}
	a.SetLinuxCPUShares(1024)
	a.SetLinuxMemoryLimit(1 << 30)
	return &api.CreateContainerResponse{Adjust: a}
}

func serveEcho(conn net.Conn, muxed bool) {
	srv, err := ttrpc.NewServer()
	if err != nil {
		os.Exit(1)
	}
	rsp := echoResponse()
	srv.RegisterService(echoService, &ttrpc.ServiceDesc{Methods: map[string]ttrpc.Method{
		echoMethod: func(_ context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			req := &api.CreateContainerRequest{}
			if err := unmarshal(req); err != nil {
				return nil, err
			}
			return rsp, nil
		},
	}})
	var l net.Listener
	if muxed {
		// The mux drops frames for connections not opened yet: read only
		// once the listener's is (as upstream's stub and runtime do).
		mux := multiplex.Multiplex(conn, multiplex.WithBlockedRead())
		if l, err = mux.Listen(multiplex.PluginServiceConn); err != nil {
			os.Exit(1)
		}
		mux.Unblock()
	} else {
		l = &oneConnListener{conn: conn, done: make(chan struct{})}
	}
	_ = srv.Serve(context.Background(), l)
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	conn net.Conn
	done chan struct{}
	sent bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.sent {
		l.sent = true
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

// startChild starts this program in child mode with one end of a socket
// pair on fd 3 and returns the other end.
func startChild(mode string, env ...string) (*exec.Cmd, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "floor"), os.NewFile(uintptr(fds[1]), "floor-peer")
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		mine.Close()
		theirs.Close()
		return nil, nil, err
	}
	theirs.Close()
	return cmd, mine, nil
}

// floorRaw measures raw round trips of req bytes out and rsp bytes back.
func floorRaw(req, rsp, ops int) ([]float64, error) {
	cmd, f, err := startChild(childRaw, fmt.Sprintf("%s=%d", childReqEnv, req), fmt.Sprintf("%s=%d", childRspEnv, rsp))
	if err != nil {
		return nil, err
	}
	defer func() { f.Close(); _ = cmd.Wait() }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out := make([]int64, floorWarmups+ops)
	fd := C.int(f.Fd())
	if C.raw_client(fd, C.size_t(req), C.size_t(rsp), C.int(len(out)), (*C.int64_t)(unsafe.Pointer(&out[0]))) != 0 {
		return nil, fmt.Errorf("raw floor: transport error")
	}
	lat := make([]float64, ops)
	for i := range lat {
		lat[i] = float64(out[floorWarmups+i]) / 1e3
	}
	return lat, nil
}

// floorTTRPC measures Go ttrpc round trips carrying req, with or without
// upstream's multiplexer in between.
func floorTTRPC(req *api.CreateContainerRequest, ops int, muxed bool) ([]float64, error) {
	mode := childTTRPC
	if muxed {
		mode = childMuxed
	}
	cmd, f, err := startChild(mode)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	var mux multiplex.Mux
	if muxed {
		mux = multiplex.Multiplex(conn)
		if conn, err = mux.Open(multiplex.PluginServiceConn); err != nil {
			return nil, err
		}
	}
	client := ttrpc.NewClient(conn)
	defer func() {
		client.Close()
		if mux != nil {
			mux.Close()
		}
	}()
	call := func() error {
		rsp := &api.CreateContainerResponse{}
		// Generous: the first call waits for the child to start serving.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return client.Call(ctx, echoService, echoMethod, req, rsp)
	}
	for i := 0; i < floorWarmups; i++ {
		if err := call(); err != nil {
			return nil, fmt.Errorf("ttrpc floor: %w", err)
		}
	}
	lat := make([]float64, ops)
	for i := range lat {
		t0 := time.Now()
		if err := call(); err != nil {
			return nil, fmt.Errorf("ttrpc floor: %w", err)
		}
		lat[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	return lat, nil
}

func protoSize(m proto.Message) int { return proto.Size(m) }
