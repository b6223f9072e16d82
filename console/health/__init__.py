"""Health and alerts: rolling counters, the chart, monitors and rules, alerts and where they are sent."""
