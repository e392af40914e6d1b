// Package v1alpha1 holds the API types of the agents.managed-agents.io group: Session,
// Agent, Environment, SandboxBinding and SandboxWarmPool. They are the Kubernetes face of the Managed Agents
// REST API: an Agent or Environment resource owns the API object of the same kind, a Session
// resource owns one API session, and the controllers keep the API in step with the spec
// and the status in step with the API.
//
// This package depends on nothing of this module (internal/archtest checks it), so clients
// can import it without the server.
//
// +kubebuilder:object:generate=true
// +groupName=agents.managed-agents.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every kind here.
var GroupVersion = schema.GroupVersion{Group: "agents.managed-agents.io", Version: "v1alpha1"}

// AddToScheme adds the kinds of this group version to a scheme. It uses apimachinery only,
// so importing the types does not pull in controller-runtime.
var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Session{}, &SessionList{},
		&Agent{}, &AgentList{},
		&Environment{}, &EnvironmentList{},
		&SandboxBinding{}, &SandboxBindingList{},
		&SandboxWarmPool{}, &SandboxWarmPoolList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
