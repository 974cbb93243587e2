//go:build cgo

package adaptation

import (
	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// encodeEvent encodes the request of an event without a response for the
// core. From NRI v0.12.0 on the runtime's request types are the core's own;
// before, they were all StateChangeEvent (_before_v0_12_0).
func encodeEvent(_ api.Event, req proto.Message) (*[]byte, error) {
	return marshal(req)
}
