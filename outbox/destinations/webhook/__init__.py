"""The webhook kind (`destination`: signed JSON, Slack-style too) and PagerDuty Events v2 (`pagerduty`)."""
