// Package controller holds the controller-runtime peer's one reconciler, written the way
// kubebuilder's book teaches: the manager's cache-backed client reads, a finalizer through
// controllerutil, and the child owned through a controller reference so that
// Owns(&corev1.ConfigMap{}) brings its changes back.
package controller

import (
	"context"
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"
)

const (
	// Manager is the field manager of the peer's applies, and the value of its children's
	// managed-by label, which the label-selected cache selects on.
	Manager = "controller-runtime-peer"
	// ManagedByLabel is the label every child carries.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	finalizer      = "controller-runtime-peer.example.com/cleanup"
	ruleFileLabel  = "monitoring.example.com/rule-file"
)

// PrometheusRuleReconciler gives every PrometheusRule a finalizer and one ConfigMap holding its
// rule file, applied server-side.
type PrometheusRuleReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// MaxConcurrentReconciles is controller-runtime's option of that name; its default is 1.
	MaxConcurrentReconciles int
}

// The verbs below are example-operator's, whose ServiceAccount the bench runs every peer under:
// reads come from the cache, and the finalizer is a patch.
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=prometheusrules,verbs=list;watch;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=prometheusrules/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch;create;patch

// Reconcile holds the finalizer on the PrometheusRule, and applies its ConfigMap while it lives.
func (r *PrometheusRuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rule := &monitoringv1.PrometheusRule{}
	if err := r.Get(ctx, req.NamespacedName, rule); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A merge patch of the finalizers, rather than the book's Update, so that a cached copy a
	// little behind the server does not conflict, and so that it makes the write the others do.
	original := client.MergeFrom(rule.DeepCopy())
	if !rule.DeletionTimestamp.IsZero() {
		if controllerutil.RemoveFinalizer(rule, finalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, rule, original))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(rule, finalizer) {
		if err := r.Patch(ctx, rule, original); err != nil {
			return ctrl.Result{}, err
		}
	}
	child, err := ruleConfigMap(rule)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.Apply(ctx, child, client.FieldOwner(Manager), client.ForceOwnership)
}

// ruleConfigMap is the rule file of rule, owned by it.
func ruleConfigMap(rule *monitoringv1.PrometheusRule) (*corev1ac.ConfigMapApplyConfiguration, error) {
	file, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		return nil, fmt.Errorf("rule %s cannot be written as YAML: %w", rule.Name, err)
	}
	owner := metav1ac.OwnerReference().
		WithAPIVersion(monitoringv1.SchemeGroupVersion.String()).
		WithKind(monitoringv1.PrometheusRuleKind).
		WithName(rule.Name).
		WithUID(rule.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
	return corev1ac.ConfigMap(rule.Name+"-rules", rule.Namespace).
		WithLabels(map[string]string{ruleFileLabel: rule.Name, ManagedByLabel: Manager}).
		WithOwnerReferences(owner).
		WithData(map[string]string{rule.Name + ".rules.yaml": string(file)}), nil
}

// SetupWithManager sets up the controller with the Manager.
func (r *PrometheusRuleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&monitoringv1.PrometheusRule{}).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("prometheusrule").
		Complete(r)
}
