"""Project hooks, one a module: validation (parameters, inputs, the run lock), threads, the plan,
redaction for plugins, the end-of-run summary, TensorBoard and MLflow tracking. ``settings.HOOKS``
registers them in the order pluggy calls them (last registered, first called)."""
