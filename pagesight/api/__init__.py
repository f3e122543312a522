"""What the gateway and the services both speak: the HTTP API's request and response models
(:mod:`pagesight.api.models`), page images and highlights as the API gives them
(:mod:`pagesight.api.images`), the authenticated :class:`pagesight.api.caller.Caller`, and the
service interface the gateway calls (:mod:`pagesight.api.protocols`). Plain Python over
:mod:`pagesight.core` and pydantic: no HTTP, no Ray."""
