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

	// As kube-apiserver refuses a watch-list when its cache stays behind the resourceVersion for 3 s.
	tooLarge := apierrors.NewTimeoutError("Too large resource version: 20, current: 10", 1)
	tooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}

	for _, tc := range []struct {
		name           string
		err            error
		afterTransient bool
		reported       bool
	}{
		{name: "expired", err: apierrors.NewResourceExpired("too old resource version: 1 (8)")},
		{name: "gone", err: &apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonGone, Code: 410}}},
		{name: "initial list cut", err: errInitialListCut},
		{name: "a watch that ended at once", err: errShortWatch},
		{name: "a second in a row", err: errShortWatch, afterTransient: true, reported: true},
		{name: "wrapped", err: fmt.Errorf("watch: %w", errShortWatch), afterTransient: true, reported: true},
		{name: "a failure after a short watch", err: apierrors.NewNotFound(nodes, "x"), afterTransient: true, reported: true},
		{name: "a resourceVersion the apiserver does not have yet", err: tooLarge},
		{name: "wrapped, after a short watch", err: fmt.Errorf("failed to watch: %w", tooLarge), afterTransient: true, reported: true},
		{name: "a short watch after it", err: errShortWatch, afterTransient: true, reported: true},
		{name: "a timeout of another cause", err: apierrors.NewTimeoutError("request did not complete", 1), reported: true},
		{name: "a failure", err: apierrors.NewInternalError(assert.AnError), reported: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.reported, reportedWatchError(tc.err, tc.afterTransient))
		})
	}
}
