"""Operations: the endpoints operators and their tools run on (`/healthz`, `/readyz`, `/metrics`)
and the structured logs. It reads every app and is imported by none."""
