// Package deps keeps the project's direct dependencies in go.mod while the code that imports them
// is being written. It is removed once every dependency has a real importer.
package deps

import (
	_ "github.com/cosi-project/runtime/pkg/state"
	_ "github.com/cosi-project/state-sqlite/pkg/state/impl/sqlite"
	_ "github.com/siderolabs/gen/xslices"
	_ "github.com/siderolabs/talos/pkg/machinery/client"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
