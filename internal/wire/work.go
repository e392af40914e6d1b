package wire

// Work is a self-hosted environment's work item (API.md §2.3). Secret is set only in the
// answer of the poll that claimed it.
type Work struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	AcknowledgedAt    *Time             `json:"acknowledged_at"`
	CreatedAt         Time              `json:"created_at"`
	Data              WorkData          `json:"data"`
	EnvironmentID     string            `json:"environment_id"`
	LatestHeartbeatAt *Time             `json:"latest_heartbeat_at"`
	Metadata          map[string]string `json:"metadata"`
	Secret            *string           `json:"secret"`
	StartedAt         *Time             `json:"started_at"`
	State             string            `json:"state"`
	StopRequestedAt   *Time             `json:"stop_requested_at"`
	StoppedAt         *Time             `json:"stopped_at"`
}

// WorkData names what a work item is for: a session, or a healthcheck.
type WorkData struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// WorkHeartbeat answers a work heartbeat, and is the current_state of a refused one.
type WorkHeartbeat struct {
	Type string `json:"type,omitempty"`
	// LastHeartbeat is the lease's version (null before the first heartbeat).
	LastHeartbeat *string `json:"last_heartbeat"`
	LeaseExtended bool    `json:"lease_extended"`
	State         string  `json:"state"`
	TTLSeconds    int64   `json:"ttl_seconds"`
}

// WorkQueueStats are an environment queue's figures.
type WorkQueueStats struct {
	Type           string `json:"type"`
	Depth          int64  `json:"depth"`
	Pending        int64  `json:"pending"`
	OldestQueuedAt *Time  `json:"oldest_queued_at"`
	WorkersPolling int64  `json:"workers_polling"`
}

// WorkUpdateParams is the body of POST /v1/environments/{id}/work/{work_id}.
type WorkUpdateParams struct {
	Metadata MetadataPatch `json:"metadata"`
}

// WorkStopParams is the body of POST /v1/environments/{id}/work/{work_id}/stop.
type WorkStopParams struct {
	Force *bool `json:"force"`
}
