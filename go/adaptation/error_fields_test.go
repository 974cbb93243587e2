package adaptation

import (
	"context"
	"errors"
	"testing"

	"github.com/containerd/ttrpc"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Go's errors are built from the fields of the core's error object, never
// from its message: whatever the core's texts say, errors.Is, status.Code
// and status.FromError give the same answers. Each case is what the core's
// accessors report for one kind of failure (crates/nri-capi/src/error.rs
// pins them), once with the message the core writes today and once
// reworded.
func TestGoErrorsDoNotDependOnTheCoresWording(t *testing.T) {
	const (
		pluginFailed = 4
		rejected     = 6
		causeNone    = 0
		causeStatus  = 1
		causeTimeout = 2
		causeClosed  = 3
	)
	for _, c := range []struct {
		name  string
		err   coreError
		is    error          // the error errors.Is finds, if any
		carry *status.Status // the status errors.As finds, if any
		whole bool           // the error is the call's own, unwrapped
	}{
		{"a plugin's status", coreError{status: pluginFailed, msg: "rpc error: code = PermissionDenied desc = no",
			plugin: "10-p", cause: causeStatus, code: int32(codes.PermissionDenied), causeMessage: "no", isCallError: true},
			nil, status.New(codes.PermissionDenied, "no"), true},
		{"a validator that timed out", coreError{status: rejected, msg: "validator plugin 10-v failed: context deadline exceeded",
			plugin: "10-v", cause: causeTimeout, code: -1},
			context.DeadlineExceeded, nil, false},
		{"a failed request's lost connection", coreError{status: pluginFailed, msg: "plugin 10-p failed to handle CreateContainer request: ttrpc: closed",
			plugin: "10-p", cause: causeClosed, code: -1},
			ttrpc.ErrClosed, nil, false},
		{"a validator's status", coreError{status: rejected, msg: "validator plugin 10-v failed: rpc error: code = Unavailable desc = busy",
			plugin: "10-v", cause: causeStatus, code: int32(codes.Unavailable), causeMessage: "busy"},
			nil, status.New(codes.Unavailable, "busy"), false},
		{"a rejection", coreError{status: rejected, msg: `validator "10-v" rejected container adjustment, reason: no`,
			plugin: "10-v", cause: causeNone, code: -1},
			nil, nil, false},
	} {
		reworded := c.err
		reworded.msg = "something else entirely: " + c.name
		for _, e := range []coreError{c.err, reworded} {
			err := goError(e)
			if c.is != nil {
				assert.ErrorIs(t, err, c.is, c.name)
			}
			var s interface{ GRPCStatus() *status.Status }
			if assert.Equal(t, c.carry != nil, errors.As(err, &s), "%s: carries a status", c.name) && c.carry != nil {
				assert.Equal(t, c.carry.Code(), s.GRPCStatus().Code(), c.name)
				assert.Equal(t, c.carry.Message(), s.GRPCStatus().Message(), c.name)
			}
			var n *nriError
			assert.Equal(t, !c.whole, errors.As(err, &n), "%s: wrapped", c.name)
			if !c.whole {
				assert.Equal(t, e.msg, err.Error(), "%s: the core's text is what is shown", c.name)
				assert.Equal(t, e.plugin, n.plugin, c.name)
			}
		}
	}
}
