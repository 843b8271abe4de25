// karpenter-kwok is Karpenter's KWOK operator (sigs.k8s.io/karpenter/kwok) with the AWS provider's own
// cloud-provider metrics controller added, so that a test cluster without AWS publishes
// karpenter_cloudprovider_instance_type_offering_{available,price_estimate} exactly as an AWS Karpenter
// does. Nothing here is imported by overlay-guard itself; see hack/karpenter-kwok.sh.
//
// Configured like Karpenter itself, through its environment (KUBECONFIG, FEATURE_GATES, METRICS_PORT,
// INSTANCE_TYPES_FILE_PATH, DISABLE_LEADER_ELECTION, ...).
package main

import (
	"github.com/samber/lo"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsmetrics "github.com/aws/karpenter-provider-aws/pkg/controllers/metrics"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		// Unlike upstream's KWOK main, which logs and runs on with no instance types: a harness that
		// silently offers nothing would make every comparison against its metrics vacuous.
		log.FromContext(ctx).Error(err, "failed constructing instance types")
		panic(err)
	}

	undecorated := kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes)
	cloudProvider := overlay.Decorate(undecorated, op.GetClient(), op.InstanceTypeStore)
	repairPolicyMatcher := lo.Must(health.NewRepairPolicyMatcher(ctx, cloudProvider))
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repairPolicyMatcher))
	op.
		WithControllers(ctx, controllers.NewControllers(
			ctx,
			op.Manager,
			op.Clock,
			op.GetClient(),
			op.EventRecorder,
			cloudProvider,
			undecorated,
			clusterState,
			op.InstanceTypeStore,
			op.PredictionStore,
		)...).
		// The overlay-decorated provider, as the AWS provider's cmd/controller/main.go hands it: the
		// published prices are effective prices after overlays.
		WithControllers(ctx, awsmetrics.NewController(op.GetClient(), cloudProvider)).
		Start(ctx)
}
