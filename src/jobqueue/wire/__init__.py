"""What goes over the HTTP API's wire: the request and response bodies, as msgspec Structs.

Neither the server nor the client owns them: the server (`entrypoints/http`) decodes
requests and encodes answers with them, the Python client (`jobqueue.client`) the other
way round, and the OpenAPI document's schemas are generated from them. They import
msgspec and the domain only: no Litestar, no httpx.
"""
