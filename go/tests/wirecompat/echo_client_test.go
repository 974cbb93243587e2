package wirecompat

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const (
	// echoEnv overrides the path of the nri-wire-echo binary.
	echoEnv = "NRI_WIRE_ECHO"
	// defaultEchoPath is where `cargo build -p nri-test-tools` puts it,
	// relative to this package's directory.
	defaultEchoPath = "../../../target/debug/nri-wire-echo"
	// strictPrefix asks nri-wire-echo to reject messages that carry fields
	// or enum numbers our schema does not know.
	strictPrefix = "!unknown:"
	// echoTimeout bounds a single request/reply exchange.
	echoTimeout = 30 * time.Second
)

// echoProcess is a running nri-wire-echo, shared by the subtests of a test.
type echoProcess struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *lockedBuffer
	broken error // set once an exchange failed; the stream is then unusable
}

// lockedBuffer collects the child's stderr, written by exec's copier
// goroutine and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// echoReply is what nri-wire-echo answered to one request.
type echoReply struct {
	OK   bool   // status byte was 0
	Body []byte // re-encoded message, or error text
}

func (r echoReply) Error() string {
	if r.OK {
		return ""
	}
	return string(r.Body)
}

// echoBinary locates nri-wire-echo, failing the test with instructions if it
// has not been built.
func echoBinary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(echoEnv)
	if path == "" {
		path = defaultEchoPath
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("resolving %s: %v", path, err)
	}
	info, err := os.Stat(abs)
	if err != nil || info.IsDir() {
		t.Fatalf("nri-wire-echo not found at %s (%v).\n"+
			"Build it first: run `cargo build -p nri-test-tools` at the repository root,\n"+
			"or point %s at the binary.", abs, err, echoEnv)
	}
	return abs
}

// startEcho starts nri-wire-echo for the duration of the test. At cleanup it
// closes stdin and requires the process to exit cleanly.
func startEcho(t *testing.T) *echoProcess {
	t.Helper()
	cmd := exec.Command(echoBinary(t))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("stdin pipe: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	e := &echoProcess{
		cmd:    cmd,
		stdin:  stdin,
		stdout: bufio.NewReader(stdout),
		stderr: &lockedBuffer{},
	}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		_ = e.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && e.broken == nil {
				t.Errorf("nri-wire-echo exited with %v; stderr:\n%s", err, e.stderr.String())
			}
		case <-time.After(echoTimeout):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("nri-wire-echo did not exit after its input was closed")
		}
	})
	return e
}

// roundTrip sends one request and waits for its reply. It is safe for
// concurrent use; requests are serialized.
func (e *echoProcess) roundTrip(name string, payload []byte) (echoReply, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.broken != nil {
		return echoReply{}, fmt.Errorf("nri-wire-echo unusable after an earlier failure: %w", e.broken)
	}

	type result struct {
		reply echoReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := e.exchange(name, payload)
		done <- result{reply, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			e.broken = r.err
			return echoReply{}, fmt.Errorf("%w (stderr: %q)", r.err, e.stderr.String())
		}
		return r.reply, nil
	case <-time.After(echoTimeout):
		e.broken = errors.New("timed out")
		_ = e.cmd.Process.Kill()
		return echoReply{}, fmt.Errorf("no reply from nri-wire-echo within %v for %q", echoTimeout, name)
	}
}

func (e *echoProcess) exchange(name string, payload []byte) (echoReply, error) {
	frame := make([]byte, 0, 8+len(name)+len(payload))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(name)))
	frame = append(frame, name...)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(payload)))
	frame = append(frame, payload...)
	if _, err := e.stdin.Write(frame); err != nil {
		return echoReply{}, fmt.Errorf("writing request: %w", err)
	}
	var header [5]byte
	if _, err := io.ReadFull(e.stdout, header[:]); err != nil {
		return echoReply{}, fmt.Errorf("reading reply header: %w", err)
	}
	switch header[0] {
	case 0, 1:
	default:
		return echoReply{}, fmt.Errorf("invalid reply status byte %d", header[0])
	}
	body := make([]byte, binary.BigEndian.Uint32(header[1:]))
	if _, err := io.ReadFull(e.stdout, body); err != nil {
		return echoReply{}, fmt.Errorf("reading reply body: %w", err)
	}
	return echoReply{OK: header[0] == 0, Body: body}, nil
}
