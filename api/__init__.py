"""What the gateway and the services both speak: the HTTP API's request and response models
(:mod:`api.models`), page images and highlights as the API gives them (:mod:`api.images`), the
authenticated :class:`api.caller.Caller`, and the service interface the gateway calls
(:mod:`api.protocols`). Plain Python over :mod:`core` and pydantic: no HTTP, no Ray."""
