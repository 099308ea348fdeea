"""Events: uploads that come in by themselves, and what imgwarm tells others.

In (each source a module; every handler idempotent, since delivery is at-least-once and
unordered):

    notification.py  S3 event notifications (AWS, MinIO, EventBridge) -> changes to originals
    order.py         per key, the newest event handled (Redis): repeats and late ones dropped
    listen.py        `imgwarm listen`: changes from SQS, a Redis list or a webhook -> jobs
    from_sqs.py      its sources, one module each: an SQS queue,
    from_redis.py    a Redis list (MinIO's Redis target, access format),
    from_http.py     a webhook endpoint (MinIO's webhook target), bearer token checked
    reconcile.py     the originals listed against their records: what events missed
    watch.py         `imgwarm watch`: a local folder's complete files -> made, removed ones down
    folder.py        what a watched folder holds: names taken, roots refused, the catch-up
    actions.py       what watch does with a complete or removed file: here, or queued

Out:

    out.py           the events a publish, a final failure and a takedown give (their JSON),
                     added to a Redis stream (the outbox)
    webhook.py       the stream POSTed to the application, signed, retried until a 2xx
    follow.py        `warm --follow`: a cache box's consumer group on the stream
"""
