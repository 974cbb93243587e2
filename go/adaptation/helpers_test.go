package adaptation

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/log"
)

// WithTestNRIVersion overrides the NRI version the runtime reports to
// plugins, for tests (upstream has the same test-only option).
func WithTestNRIVersion(v string) Option {
	return func(r *Adaptation) error {
		r.nriVersion = v
		return nil
	}
}

// CoreThreads counts the threads the core's runtimes have running in this
// process (the core counts them itself: a Go thread started from within a
// callback inherits the core thread's name, so /proc cannot tell them
// apart).
func CoreThreads() int { return coreThreads() }

// PluginClosed gives a function that tells whether the named plugin's
// connection is closed, for tests that wait for the adaptation to notice
// one (upstream has the same test-only method). Each call of it asks the
// core, without waiting for an event in progress.
func (r *Adaptation) PluginClosed(name string) func() bool {
	return func() bool { return !r.hasPlugin(name) }
}

// LogRecorder keeps what upstream's pkg/log receives during a test.
type LogRecorder struct {
	mu    sync.Mutex
	lines []string
}

// RecordLog makes a LogRecorder pkg/log's logger until t ends.
func RecordLog(t *testing.T) *LogRecorder {
	rec := &LogRecorder{}
	prev := log.Get()
	log.Set(rec)
	t.Cleanup(func() { log.Set(prev) })
	return rec
}

func (l *LogRecorder) add(f string, a ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
}
func (l *LogRecorder) Debugf(_ context.Context, f string, a ...interface{}) { l.add(f, a...) }
func (l *LogRecorder) Infof(_ context.Context, f string, a ...interface{})  { l.add(f, a...) }
func (l *LogRecorder) Warnf(_ context.Context, f string, a ...interface{})  { l.add(f, a...) }
func (l *LogRecorder) Errorf(_ context.Context, f string, a ...interface{}) { l.add(f, a...) }

// Has says whether a line recorded so far contains s.
func (l *LogRecorder) Has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// String is the lines recorded so far, quoted, for a failure's message.
func (l *LogRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%q", l.lines)
}
