package k8ssink

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

func TestEventBudget(t *testing.T) {
	t.Parallel()

	const reason = "TestEventBudgetApproved"

	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	limiter := flowcontrol.NewTokenBucketRateLimiterWithClock(EventBudgetQPS, EventBudgetBurst, clock)
	fake := record.NewFakeRecorder(1000)
	r := newBudgetedRecorder(fake, limiter, zaptest.NewLogger(t))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}

	// A burst: the budget's burst of Normal Events is posted, the rest counted; Warnings always pass.
	for range 150 {
		r.Event(node, corev1.EventTypeNormal, reason, "approved")
	}

	for range 20 {
		r.Eventf(node, corev1.EventTypeWarning, reason, "denied: %s", "reserved name")
	}

	assert.Len(t, fake.Events, EventBudgetBurst+20)
	assert.InDelta(t, 50, testutil.ToFloat64(metrics.EventsSuppressed.WithLabelValues(reason)), 0)

	// A second later the budget allows its rate again.
	clock.Step(time.Second)

	for range 20 {
		r.AnnotatedEventf(node, nil, corev1.EventTypeNormal, reason, "approved %d", 1)
	}

	assert.Len(t, fake.Events, EventBudgetBurst+20+EventBudgetQPS)
	assert.InDelta(t, 60, testutil.ToFloat64(metrics.EventsSuppressed.WithLabelValues(reason)), 0)
}
