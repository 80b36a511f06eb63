package kubeclient

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestReportedWatchError(t *testing.T) {
	t.Parallel()

	nodes := schema.GroupResource{Resource: "nodes"}

	for _, tc := range []struct {
		name       string
		err        error
		afterShort bool
		reported   bool
	}{
		{name: "expired", err: apierrors.NewResourceExpired("too old resource version: 1 (8)")},
		{name: "gone", err: &apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonGone, Code: 410}}},
		{name: "initial list cut", err: errInitialListCut},
		{name: "a watch that ended at once", err: errShortWatch},
		{name: "a second in a row", err: errShortWatch, afterShort: true, reported: true},
		{name: "wrapped", err: fmt.Errorf("watch: %w", errShortWatch), afterShort: true, reported: true},
		{name: "a failure after a short watch", err: apierrors.NewNotFound(nodes, "x"), afterShort: true, reported: true},
		{name: "a failure", err: apierrors.NewInternalError(assert.AnError), reported: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.reported, reportedWatchError(tc.err, tc.afterShort))
		})
	}
}
