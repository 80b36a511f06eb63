package kubeclient

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// ReadyzProbe asks the apiserver's /readyz: answered says that it answered at all, err that it is not ready
// (or could not be asked).
type ReadyzProbe func(ctx context.Context) (answered bool, err error)

// NewReadyzProbe returns the /readyz probe of cfg's apiserver. Its client takes any answer as it comes, as
// client-go's discovery client does: /readyz answers in plain text, and a client that negotiates the
// answer's content type would report a "not ready" answer as no answer at all.
func NewReadyzProbe(cfg *rest.Config) (ReadyzProbe, error) {
	probeConfig := rest.CopyConfig(cfg)
	probeConfig.APIPath, probeConfig.GroupVersion = "", nil
	probeConfig.NegotiatedSerializer = serializer.NegotiatedSerializerWrapper(runtime.SerializerInfo{
		Serializer: runtime.NoopEncoder{Decoder: Codecs.UniversalDecoder()},
	})

	if probeConfig.UserAgent == "" {
		probeConfig.UserAgent = rest.DefaultKubernetesUserAgent()
	}

	client, err := rest.UnversionedRESTClientFor(probeConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to create the apiserver probe: %w", err)
	}

	return func(ctx context.Context) (bool, error) {
		result := client.Get().AbsPath("/readyz").Do(ctx)

		var status int

		result.StatusCode(&status)

		return status != 0, result.Error() //nolint:wrapcheck // The caller names the probe.
	}, nil
}
