//go:build race

package adaptation

import (
	"sync"
	"syscall"
)

// The race detector takes Go's own fd I/O as synchronization: syscall.Write
// releases and syscall.Read acquires one process-wide sync point. The
// core's socket I/O with plugins happens in Rust, where the detector cannot
// see it, so data a runtime hands to a plugin through NRI (or back) would
// look unsynchronized. raceIOSync replays that edge around every crossing
// of the boundary. Built only with -race.

var racePipe struct {
	sync.Mutex
	fds [2]int
	err error
}

func init() {
	racePipe.err = syscall.Pipe2(racePipe.fds[:], syscall.O_CLOEXEC)
}

// raceIOSync releases everything this goroutine did so far to, and
// acquires everything released by, any fd I/O in the process.
func raceIOSync() {
	racePipe.Lock()
	defer racePipe.Unlock()
	if racePipe.err != nil {
		return
	}
	b := []byte{0}
	if n, _ := syscall.Write(racePipe.fds[1], b); n == 1 {
		_, _ = syscall.Read(racePipe.fds[0], b)
	}
}
