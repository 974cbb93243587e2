// Package runtimeapi names what upstream's pkg/adaptation and nri-rs's
// go/adaptation both export, so that a test or benchmark drives either
// through one value.
package runtimeapi

import (
	"context"

	upstream "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"

	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
)

// API is what both adaptations export (their request and response
// types are all aliases of upstream's pkg/api types).
type API interface {
	Start() error
	Stop()
	RunPodSandbox(context.Context, *api.RunPodSandboxRequest) error
	UpdatePodSandbox(context.Context, *api.UpdatePodSandboxRequest) (*api.UpdatePodSandboxResponse, error)
	PostUpdatePodSandbox(context.Context, *api.PostUpdatePodSandboxRequest) error
	StopPodSandbox(context.Context, *api.StopPodSandboxRequest) error
	RemovePodSandbox(context.Context, *api.RemovePodSandboxRequest) error
	CreateContainer(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error)
	PostCreateContainer(context.Context, *api.PostCreateContainerRequest) error
	StartContainer(context.Context, *api.StartContainerRequest) error
	PostStartContainer(context.Context, *api.PostStartContainerRequest) error
	UpdateContainer(context.Context, *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error)
	PostUpdateContainer(context.Context, *api.PostUpdateContainerRequest) error
	StopContainer(context.Context, *api.StopContainerRequest) (*api.StopContainerResponse, error)
	RemoveContainer(context.Context, *api.RemoveContainerRequest) error
}

var (
	_ API = (*upstream.Adaptation)(nil)
	_ API = (*nrirs.Adaptation)(nil)
)
