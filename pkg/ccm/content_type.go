package ccm

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// PreferProtobuf makes every request of the clients of cfg send built-in types to the apiserver in
// protobuf and ask for protobuf answers, with JSON still accepted, as kube-controller-manager does: a Node
// carrying the status a kubelet posts decodes from protobuf at a fraction of the CPU and garbage of JSON.
// client-go's generated methods of built-in types already prefer protobuf when the configuration names no
// content type, but its hand-written ones do not (the event sink's, which the event recorder posts every
// Event with), nor raw requests: naming it here makes all of them agree, whatever the client-go version.
// Every client talos-ccm builds is a typed client of built-in types, which every apiserver serves in
// protobuf. Patches keep their own JSON content types (merge and strategic merge patches).
//
// A configuration that already names a content type is left alone: a host whose clients go through a proxy
// that only speaks JSON sets ContentType to "application/json" and keeps it.
func PreferProtobuf(cfg *rest.Config) {
	if cfg.ContentType != "" {
		return
	}

	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
}
