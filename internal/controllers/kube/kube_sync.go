package kube

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// writeSynced records that a mirror holds the informer's initial list of objects.
func writeSynced(ctx context.Context, r controller.ReaderWriter, id resource.ID, objects int) error {
	err := safe.WriterModify(ctx, r, kube.NewKubeSync(kube.NamespaceName, id), func(res *kube.KubeSync) error {
		res.TypedSpec().Value.Synced = true
		res.TypedSpec().Value.Objects = int32(min(objects, 1<<30)) //nolint:gosec // Bounded.

		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to write the sync state of %s: %w", id, err)
	}

	return nil
}
