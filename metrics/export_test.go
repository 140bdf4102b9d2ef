package metrics

// ReconcileBuckets is reconcileBuckets, for the tests of package metrics_test, which may
// import command (it imports metrics).
var ReconcileBuckets = reconcileBuckets
