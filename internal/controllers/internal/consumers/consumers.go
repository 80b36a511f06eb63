// Package consumers lets a controller write its outputs with the finalizers of the controllers that take
// them as their primary input already set. Each consumer would otherwise add its own with an update of
// every new output, and every update of a resource runs every controller that reads it: while thousands of
// Nodes join, that is thousands of updates per consumer. A consumer's finalizer that is present from the
// start is removed by the consumer as its own would be, when the resource is torn down; a controller named
// here that does not run would keep the resources torn down for ever, so the pipeline names exactly the
// consumers it registers (pkg/ccm checks it for every selection of controllers).
package consumers

import "github.com/cosi-project/runtime/pkg/resource"

// Hold sets the finalizers of the consumers on res.
func Hold(res resource.Resource, consumers []resource.Finalizer) {
	for _, name := range consumers {
		res.Metadata().Finalizers().Add(name)
	}
}
