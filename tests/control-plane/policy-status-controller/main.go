package main

import (
	"context"
	"os"
	"time"

	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	validating "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/controller/validatingadmissionpolicystatus"
	"k8s.io/kubernetes/pkg/generated/openapi"
)

// The ValidatingAdmissionPolicy status controller of kube-controller-manager,
// alone: it type-checks each policy's expressions against the API server's
// schemas and writes status.typeChecking. The control plane of
// scripts/control-plane.sh runs no controller manager; the apiserver test
// suite starts this instead. Wired as in
// cmd/kube-controller-manager/app/validatingadmissionpolicystatus.go.
//
// Usage: policy-status-controller KUBECONFIG
func main() {
	config, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		panic(err)
	}
	client := kubernetes.NewForConfigOrDie(config)
	disco := discovery.NewDiscoveryClientForConfigOrDie(config)
	schemas := resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, k8sscheme.Scheme, apiextensionsscheme.Scheme).
		Combine(&resolver.ClientDiscoveryResolver{Discovery: disco})
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	controller, err := validatingadmissionpolicystatus.NewController(
		factory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		client.AdmissionregistrationV1().ValidatingAdmissionPolicies(),
		&validating.TypeChecker{SchemaResolver: schemas, RestMapper: mapper},
	)
	if err != nil {
		panic(err)
	}
	factory.Start(context.Background().Done())
	controller.Run(context.Background(), 1)
}
