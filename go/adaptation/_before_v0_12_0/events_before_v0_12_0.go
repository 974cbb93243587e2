//go:build cgo

package adaptation

// Before NRI v0.12.0 the events without a response had no request types of
// their own: runtimes passed them as, and builtin plugins took them as, a
// StateChangeEvent {event = 1, pod = 2, container = 3}. The core reads
// v0.12's requests, {pod = 1, container = 2}. The two are converted by
// renumbering the fields, so the pod and the container are neither decoded
// nor encoded again.

import (
	"context"
	"errors"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

var (
	// The pod's and the container's field numbers, in StateChangeEvent and
	// in v0.12's event requests.
	stateFields = [2]protowire.Number{2, 3}
	eventFields = [2]protowire.Number{1, 2}
)

// renumber appends to dst the fields of msg numbered from[i], numbered
// to[i] instead; it leaves out every other field.
func renumber(dst, msg []byte, from, to [2]protowire.Number) ([]byte, error) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return dst, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return dst, protowire.ParseError(m)
		}
		for i := range from {
			if num == from[i] {
				dst = protowire.AppendTag(dst, to[i], typ)
				dst = append(dst, msg[n:n+m]...)
			}
		}
		msg = msg[n+m:]
	}
	return dst, nil
}

// encodeEvent encodes the request of an event without a response for the
// core: a StateChangeEvent as the event's own request. It sets the
// request's event first, as upstream's methods of these releases did.
func encodeEvent(ev api.Event, req proto.Message) (*[]byte, error) {
	evt, ok := req.(*api.StateChangeEvent)
	if !ok {
		return marshal(req)
	}
	evt.Event = ev
	bp, err := marshal(evt)
	defer releaseBuffer(bp)
	out := bufferPool.Get().(*[]byte)
	if err == nil {
		*out, err = renumber((*out)[:0], *bp, stateFields, eventFields)
	}
	return out, err
}

// decodeStateEvent decodes the core's request of event ev as the
// StateChangeEvent a builtin plugin of these releases takes.
func decodeStateEvent(ev api.Event, in []byte) (*api.StateChangeEvent, error) {
	bp := bufferPool.Get().(*[]byte)
	defer releaseBuffer(bp)
	var err error
	if *bp, err = renumber((*bp)[:0], in, eventFields, stateFields); err != nil {
		return nil, err
	}
	evt := &api.StateChangeEvent{}
	if err := proto.Unmarshal(*bp, evt); err != nil {
		return nil, err
	}
	evt.Event = ev
	return evt, nil
}

// stateChangeEvents are the events StateChange relays.
var stateChangeEvents = map[api.Event]bool{
	api.Event_RUN_POD_SANDBOX:         true,
	api.Event_POST_UPDATE_POD_SANDBOX: true,
	api.Event_STOP_POD_SANDBOX:        true,
	api.Event_REMOVE_POD_SANDBOX:      true,
	api.Event_POST_CREATE_CONTAINER:   true,
	api.Event_START_CONTAINER:         true,
	api.Event_POST_START_CONTAINER:    true,
	api.Event_POST_UPDATE_CONTAINER:   true,
	api.Event_REMOVE_CONTAINER:        true,
}

// StateChange relays a state change to the plugins, as the method of that
// event does. Upstream exported it before NRI v0.12.0. Of other events,
// plugins of those releases took no notice, so neither does this.
func (r *Adaptation) StateChange(ctx context.Context, evt *StateChangeEvent) error {
	if evt.GetEvent() == api.Event_UNKNOWN {
		return errors.New("invalid (unset) event in state change notification")
	}
	if !stateChangeEvents[evt.GetEvent()] {
		return nil
	}
	return r.event(ctx, evt.GetEvent(), evt)
}
