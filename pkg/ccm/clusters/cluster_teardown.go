package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/resources"
)

// clusterKinds are the kinds of every resource a pipeline of the given prefix keeps in the host's state:
// every talos-ccm type in its namespace, then the prefix's namespace and resource definitions.
func clusterKinds(prefix string) []resource.Kind {
	var kinds []resource.Kind

	kind := func(ns resource.Namespace, typ resource.Type) resource.Kind {
		md := resource.NewMetadata(ns, typ, "", resource.VersionUndefined)

		return &md
	}

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()
		kinds = append(kinds, kind(HostNamespace(prefix, rd.DefaultNamespace), rd.Type))
	}

	metaNamespace := HostNamespace(prefix, meta.NamespaceName)

	return append(kinds, kind(metaNamespace, meta.ResourceDefinitionType), kind(metaNamespace, meta.NamespaceType))
}

// eachClusterResource calls fn with every resource a pipeline of the given prefix keeps in the host's
// state, and returns the failures of fn, all of them.
func eachClusterResource(ctx context.Context, host state.State, prefix string, fn func(resource.Resource) error) error {
	var errs []error

	for _, kind := range clusterKinds(prefix) {
		list, err := host.List(ctx, kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to list %s in %s: %w", kind.Type(), kind.Namespace(), err))

			continue
		}

		for _, r := range list.Items {
			if err = fn(r); err != nil {
				errs = append(errs, err)
			}
		}
	}

	return errors.Join(errs...)
}

// destroyClusterResources destroys every resource of a stopped pipeline in the host's state, each with its
// finalizers removed first: the controllers that put them there do not run any more. Once they are all
// gone, it releases the prefix's namespaces when the host's state can (see NamespaceReleaser).
func destroyClusterResources(ctx context.Context, host state.State, prefix string) error {
	if err := destroyEachClusterResource(ctx, host, prefix); err != nil {
		return err
	}

	releaser, ok := host.(NamespaceReleaser)
	if !ok {
		return nil
	}

	namespaces, err := PrefixedNamespaces(prefix)
	if err != nil {
		return fmt.Errorf("failed to release the namespaces of prefix %q: %w", prefix, err)
	}

	names := make([]resource.Namespace, 0, len(namespaces))
	for _, ns := range namespaces {
		names = append(names, ns.Name)
	}

	if err = releaser.ReleaseNamespaces(ctx, names); err != nil {
		return fmt.Errorf("failed to release the namespaces of prefix %q: %w", prefix, err)
	}

	return nil
}

// destroyEachClusterResource destroys every resource of a stopped pipeline in the host's state.
func destroyEachClusterResource(ctx context.Context, host state.State, prefix string) error {
	return eachClusterResource(ctx, host, prefix, func(r resource.Resource) error {
		md := r.Metadata()

		if finalizers := *md.Finalizers(); len(finalizers) > 0 {
			if err := host.RemoveFinalizer(ctx, md, finalizers...); err != nil && !state.IsNotFoundError(err) {
				return fmt.Errorf("failed to remove the finalizers of %s %s/%s: %w", md.Type(), md.Namespace(), md.ID(), err)
			}
		}

		if err := host.Destroy(ctx, md, state.WithDestroyOwner(md.Owner())); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy %s %s/%s: %w", md.Type(), md.Namespace(), md.ID(), err)
		}

		return nil
	})
}

// releaseStaleFinalizers removes, from every resource of the pipeline of the given prefix, the finalizers
// of controllers that the pipeline about to run (rt) does not have: a cluster reconfigured without a
// controller would otherwise keep the resources that controller held torn down for ever.
func releaseStaleFinalizers(ctx context.Context, host state.State, prefix string, rt *runtime.Runtime) error {
	graph, err := rt.GetDependencyGraph()
	if err != nil {
		return fmt.Errorf("failed to read the pipeline's controllers: %w", err)
	}

	running := map[string]bool{}
	for _, edge := range graph.Edges {
		running[edge.ControllerName] = true
	}

	return eachClusterResource(ctx, host, prefix, func(r resource.Resource) error {
		md := r.Metadata()

		stale := slices.DeleteFunc(slices.Clone(*md.Finalizers()), func(f resource.Finalizer) bool { return running[f] })
		if len(stale) == 0 {
			return nil
		}

		if err := host.RemoveFinalizer(ctx, md, stale...); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to remove the finalizers %v of %s %s/%s: %w", stale, md.Type(), md.Namespace(), md.ID(), err)
		}

		return nil
	})
}
