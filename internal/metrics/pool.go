package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolStats is a database pool's state at one moment: what pgxpool.Pool.Stat reports, in
// plain types so this package needs no database driver (package app converts).
type PoolStats struct {
	// Connections by state now, and the pool's ceiling.
	Acquired, Idle, Constructing, Max int32
	// Cumulative since the pool opened.
	Acquires, EmptyAcquires, CanceledAcquires int64
	AcquireWait                               time.Duration
}

// poolCollector reads the pool's stats on every scrape: nothing to keep in step.
type poolCollector struct {
	stats func() PoolStats

	conns, max, acquires, empty, canceled, wait *prometheus.Desc
}

// NewPoolCollector is a collector over a database pool's stats, read when scraped.
func NewPoolCollector(stats func() PoolStats) prometheus.Collector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "db_pool", n) }
	return &poolCollector{
		stats: stats,
		conns: prometheus.NewDesc(name("connections"), "Database pool connections now, by state (acquired, idle, constructing).",
			[]string{"state"}, nil),
		max:      prometheus.NewDesc(name("max_connections"), "The database pool's maximum size.", nil, nil),
		acquires: prometheus.NewDesc(name("acquires_total"), "Connections acquired from the database pool.", nil, nil),
		empty: prometheus.NewDesc(name("empty_acquires_total"),
			"Acquisitions that found no idle connection and waited for one to be made or released.", nil, nil),
		canceled: prometheus.NewDesc(name("canceled_acquires_total"), "Acquisitions cancelled by their context while waiting.", nil, nil),
		wait: prometheus.NewDesc(name("acquire_wait_seconds_total"),
			"Time spent waiting for a connection from the database pool.", nil, nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.max, c.acquires, c.empty, c.canceled, c.wait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Acquired), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Idle), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Constructing), "constructing")
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.Max))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.Acquires))
	ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(s.EmptyAcquires))
	ch <- prometheus.MustNewConstMetric(c.canceled, prometheus.CounterValue, float64(s.CanceledAcquires))
	ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, s.AcquireWait.Seconds())
}
